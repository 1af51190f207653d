package main

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeFile is the part of deploy/compose.yaml the test reads.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Ports       []string          `yaml:"ports"`
	Environment map[string]string `yaml:"environment"`
	Profiles    []string          `yaml:"profiles"`
}

// TestDeployFiles checks what docs/operations.md's Deploy section says of the
// deploy files, since CI has no Docker engine to run them: both replicas
// run the one image docker build makes (image: trellis, nothing built by
// Compose), publish on loopback only, and take the admin token and the
// order expiry from the environment; the Dockerfile needs no frontend
// image from a registry.
func TestDeployFiles(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("deploy/compose.yaml does not parse: %v", err)
	}
	replicas := []struct {
		name string // the service
		port string // what it publishes
	}{
		{"trellis-1", "127.0.0.1:9000:9000"},
		{"trellis-2", "127.0.0.1:9001:9000"},
	}
	for _, r := range replicas {
		s, ok := c.Services[r.name]
		switch {
		case !ok:
			t.Errorf("no service %s", r.name)
			continue
		case s.Image != "trellis":
			t.Errorf("%s: image %q, want trellis (what docker build -t trellis . makes)", r.name, s.Image)
		case s.Build != nil:
			t.Errorf("%s: has build: %v; Compose would build an image of its own", r.name, s.Build)
		}
		if len(s.Ports) != 1 || s.Ports[0] != r.port {
			t.Errorf("%s: ports %q, want [%q]: loopback only", r.name, s.Ports, r.port)
		}
		for v, want := range map[string]string{
			"TRELLIS_ADMIN_TOKEN":  "${TRELLIS_ADMIN_TOKEN:?",
			"TRELLIS_ORDER_EXPIRY": "${TRELLIS_ORDER_EXPIRY:-",
			// Tracing off unless the operator names a collector.
			"OTEL_EXPORTER_OTLP_ENDPOINT": "${OTEL_EXPORTER_OTLP_ENDPOINT:-}",
		} {
			if got := s.Environment[v]; !strings.HasPrefix(got, want) {
				t.Errorf("%s: %s is %q, want it from the environment (%s…})", r.name, v, got, want)
			}
		}
	}
	// The collector of docs/observability.md runs only in its profile.
	if j, ok := c.Services["jaeger"]; !ok || len(j.Profiles) != 1 || j.Profiles[0] != "tracing" {
		t.Errorf("no jaeger service in the tracing profile alone: %+v", j)
	}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q on every interface", name, p)
			}
		}
	}

	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(dockerfile)) {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "# syntax=") {
			t.Errorf("the Dockerfile names a frontend (%q): BuildKit would pull it from a registry", strings.TrimSpace(line))
		}
	}
}
