package manifests

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/trellis-go/trellis"
)

// secretVars are the variables whose value is a secret: they come from
// the Secret, never from a manifest.
var secretVars = []string{trellis.EnvClusterSecret, trellis.EnvAdminToken}

// redisVars may be literal only without a password (the dev overlay's own
// Redis).
var redisVars = []string{trellis.EnvRedisURL, trellis.EnvRedisClusterURL}

// TestSecretKeysExist: every key a container takes from the Secret
// "trellis" is one of secret.template.yaml's, and the template holds no
// value.
func TestSecretKeysExist(t *testing.T) {
	tmpl := find[corev1.Secret](t, decodeFile(t, "base/secret.template.yaml"), "trellis")
	for k, v := range tmpl.StringData {
		if v != "" {
			t.Errorf("secret.template.yaml: %s has a value; the template names keys only", k)
		}
	}
	if len(tmpl.Data) > 0 {
		t.Errorf("secret.template.yaml has data: %v", tmpl.Data)
	}
	for name, c := range containers(t) {
		for _, e := range c.Env {
			r := e.ValueFrom
			if r == nil || r.SecretKeyRef == nil {
				continue
			}
			if r.SecretKeyRef.Name != tmpl.Name {
				t.Errorf("%s: %s from the Secret %q, not %q", name, e.Name, r.SecretKeyRef.Name, tmpl.Name)
			}
			if _, ok := tmpl.StringData[r.SecretKeyRef.Key]; !ok {
				t.Errorf("%s: %s from key %q, which secret.template.yaml does not have", name, e.Name, r.SecretKeyRef.Key)
			}
		}
	}
}

// TestNoSecretInManifests: in every manifest under deploy/kubernetes
// (patches and templates too), the secret variables come from the Secret
// by key, a literal Redis URL has no password, and a Secret holds no
// value; no overlay makes a Secret (its values would be in the
// repository).
func TestNoSecretInManifests(t *testing.T) {
	for _, dir := range overlays {
		for _, o := range build(t, dir) {
			if o.kind == "Secret" {
				t.Errorf("%s makes the Secret %s: its values would be in the repository", dir, o.name)
			}
		}
	}
	files := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || d.Name() == "kustomization.yaml" {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files++
		for _, o := range decodeFile(t, rel) {
			switch v := o.value.(type) {
			case *corev1.Secret:
				for k, val := range v.StringData {
					if val != "" {
						t.Errorf("%s: the Secret %s has a value for %s", rel, o.name, k)
					}
				}
				if len(v.Data) > 0 {
					t.Errorf("%s: the Secret %s has data", rel, o.name)
				}
			case *appsv1.Deployment:
				for _, c := range v.Spec.Template.Spec.Containers {
					for _, p := range literalSecrets(c) {
						t.Errorf("%s: %s", rel, p)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 8 {
		t.Errorf("only %d manifests found under %s", files, root)
	}
}

// literalSecrets is what is wrong with c's environment: a secret variable
// not from a Secret, a Redis URL with a password in it.
func literalSecrets(c corev1.Container) []string {
	var bad []string
	for _, e := range c.Env {
		if slices.Contains(secretVars, e.Name) && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			bad = append(bad, e.Name+" is not taken from a Secret")
		}
		if !slices.Contains(redisVars, e.Name) || e.Value == "" {
			continue
		}
		if u, err := url.Parse(e.Value); err != nil {
			bad = append(bad, e.Name+": "+err.Error())
		} else if _, has := u.User.Password(); has {
			bad = append(bad, e.Name+" holds a password; take it from the Secret")
		}
	}
	return bad
}

// TestLiteralSecretsCaught: the check above can fail.
func TestLiteralSecretsCaught(t *testing.T) {
	tests := []struct {
		name string
		env  corev1.EnvVar
		bad  bool
	}{
		{"token literal", corev1.EnvVar{Name: trellis.EnvAdminToken, Value: "t0ken"}, true},
		{"secret literal", corev1.EnvVar{Name: trellis.EnvClusterSecret, Value: "s"}, true},
		{"url with password", corev1.EnvVar{Name: trellis.EnvRedisURL, Value: "redis://:pw@r:6379/0"}, true},
		{"url without", corev1.EnvVar{Name: trellis.EnvRedisURL, Value: "redis://r:6379/0"}, false},
		{"token from a Secret", corev1.EnvVar{Name: trellis.EnvAdminToken, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{Key: "admin-token"}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := literalSecrets(corev1.Container{Env: []corev1.EnvVar{tt.env}})
			if (len(got) > 0) != tt.bad {
				t.Errorf("literalSecrets = %q, want bad %v", got, tt.bad)
			}
		})
	}
}
