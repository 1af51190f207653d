package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// root is deploy/kubernetes, relative to this package.
const root = ".."

// overlays are the kustomizations an operator applies.
var overlays = []string{"overlays/dev", "overlays/production"}

// object is one manifest decoded into its Kubernetes type.
type object struct {
	kind, name string
	value      any // *appsv1.Deployment, *corev1.Service, …
}

// newObject is the typed value each kind the manifests may hold decodes
// into; any other kind fails the test.
var newObject = map[string]func() any{
	"apps/v1/Deployment":                     func() any { return new(appsv1.Deployment) },
	"v1/Service":                             func() any { return new(corev1.Service) },
	"v1/ServiceAccount":                      func() any { return new(corev1.ServiceAccount) },
	"v1/Secret":                              func() any { return new(corev1.Secret) },
	"networking.k8s.io/v1/NetworkPolicy":     func() any { return new(networkingv1.NetworkPolicy) },
	"policy/v1/PodDisruptionBudget":          func() any { return new(policyv1.PodDisruptionBudget) },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
}

// build runs kustomize on the overlay dir (under root) and decodes every
// object it makes strictly.
func build(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []object
	for _, r := range m.Resources() {
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatalf("%s: %s: %v", dir, r.CurId(), err)
		}
		o, err := decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		objs = append(objs, o)
	}
	return objs
}

// decode decodes one manifest strictly into its kind's type.
func decode(raw []byte) (object, error) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return object{}, fmt.Errorf("not a manifest: %w", err)
	}
	mk, ok := newObject[meta.APIVersion+"/"+meta.Kind]
	if !ok {
		return object{}, fmt.Errorf("%s %s: a kind this test does not know: add it to newObject", meta.APIVersion, meta.Kind)
	}
	// As the API server decodes: case-sensitive field names (encoding/json
	// alone would take readOnlyRootFileSystem), no unknown or duplicate
	// field.
	v := mk()
	j, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return object{}, fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
	}
	strict, err := kjson.UnmarshalStrict(j, v, kjson.DisallowUnknownFields)
	if err = errors.Join(append([]error{err}, strict...)...); err != nil {
		return object{}, fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
	}
	return object{kind: meta.Kind, name: meta.Metadata.Name, value: v}, nil
}

// decodeFile decodes a file of one or more manifests strictly.
func decodeFile(t *testing.T, path string) []object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	var objs []object
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		o, err := decode(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs = append(objs, o)
	}
	return objs
}

// find is the object of type T named name, failing the test when absent.
func find[T any](t *testing.T, objs []object, name string) *T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.value.(*T); ok && o.name == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T named %q", zero, name)
	return nil
}

// server is the server's container of the Deployment trellis.
func server(t *testing.T, objs []object) corev1.Container {
	t.Helper()
	d := find[appsv1.Deployment](t, objs, "trellis")
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "server" {
			return c
		}
	}
	t.Fatal("the Deployment trellis has no container named server")
	return corev1.Container{}
}

// TestDecodeStrictly: each overlay builds, every object decodes into its
// own type with no unknown field, and a misspelt field is caught.
func TestDecodeStrictly(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			if len(objs) < 5 {
				t.Errorf("only %d objects", len(objs))
			}
		})
	}
	// The check itself: a field the type does not have fails.
	for _, bad := range []string{
		"spec: {selectr: {a: b}}",                    // misspelt
		"spec: {Selector: {a: b}}",                   // the wrong case
		"spec: {selector: {a: b}, selector: {c: d}}", // twice
	} {
		if _, err := decode([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n" + bad + "\n")); err == nil {
			t.Errorf("%s decoded without an error", bad)
		}
	}
}
