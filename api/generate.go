package api

import _ "embed"

// Spec is the framework's own contract (openapi.yaml): the routes every
// Trellis service serves itself — health, readiness, metrics, the
// contracts and the admin API — as the service serves it at GET
// /admin/openapi.yaml. Package api/admin is generated from its admin
// operations. An application's contract is its own, given to the service
// with trellis.WithContract and served at GET /openapi.yaml.
//
//go:embed openapi.yaml
var Spec []byte
