// Package manifests checks deploy/kubernetes against the binary: the
// overlays are built with kustomize's Go API, every object is decoded
// strictly into the Kubernetes API's own types (a misspelt or unknown
// field fails), and the probes, ports, environment variables and secret
// keys are held against what the server reads and serves. It is a module
// of its own so that the main module does not depend on Kubernetes.
package manifests
