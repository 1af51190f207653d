package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// deploymentManifest is the Deployment that deploy/kubernetes applies,
// relative to this package.
var deploymentManifest = filepath.Join("..", "..", "deploy", "kubernetes", "base", "deployment.yaml")

// podManifest is what the kubelet model (kubelet_test.go) takes from the
// Deployment's pod: its lifecycle, its readiness probe and the server's
// plain environment. (deploy/kubernetes/manifests_test checks the same
// file strictly against the Kubernetes API's types.)
type podManifest struct {
	grace          time.Duration // terminationGracePeriodSeconds
	preStop        time.Duration // the preStop sleep
	minReady       time.Duration // minReadySeconds
	readyPath      string        // the readiness probe's path
	readyPeriod    time.Duration // periodSeconds
	readyTimeout   time.Duration // timeoutSeconds
	readyFailures  int           // failureThreshold
	readySuccesses int           // successThreshold (1 when unset)
	env            []string      // the server's TRELLIS_ variables set by value, NAME=VALUE
}

// readPodManifest reads the server's pod from the Deployment manifest;
// a field the model needs that is missing fails the test.
func readPodManifest(t *testing.T) podManifest {
	t.Helper()
	raw, err := os.ReadFile(deploymentManifest)
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
		} `yaml:"httpGet"`
		PeriodSeconds    int `yaml:"periodSeconds"`
		TimeoutSeconds   int `yaml:"timeoutSeconds"`
		FailureThreshold int `yaml:"failureThreshold"`
		SuccessThreshold int `yaml:"successThreshold"`
	}
	var d struct {
		Spec struct {
			MinReadySeconds int `yaml:"minReadySeconds"`
			Template        struct {
				Spec struct {
					TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
					Containers                    []struct {
						Name string `yaml:"name"`
						Env  []struct {
							Name  string `yaml:"name"`
							Value string `yaml:"value"`
						} `yaml:"env"`
						ReadinessProbe probe `yaml:"readinessProbe"`
						Lifecycle      struct {
							PreStop struct {
								Sleep struct {
									Seconds int `yaml:"seconds"`
								} `yaml:"sleep"`
							} `yaml:"preStop"`
						} `yaml:"lifecycle"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", deploymentManifest, err)
	}
	pod := d.Spec.Template.Spec
	for _, c := range pod.Containers {
		if c.Name != "server" {
			continue
		}
		rp := c.ReadinessProbe
		m := podManifest{
			grace:          time.Duration(pod.TerminationGracePeriodSeconds) * time.Second,
			preStop:        time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second,
			minReady:       time.Duration(d.Spec.MinReadySeconds) * time.Second,
			readyPath:      rp.HTTPGet.Path,
			readyPeriod:    time.Duration(rp.PeriodSeconds) * time.Second,
			readyTimeout:   time.Duration(rp.TimeoutSeconds) * time.Second,
			readyFailures:  rp.FailureThreshold,
			readySuccesses: max(rp.SuccessThreshold, 1),
		}
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "TRELLIS_") && e.Value != "" {
				m.env = append(m.env, e.Name+"="+e.Value)
			}
		}
		if m.grace <= m.preStop || m.preStop <= 0 || m.readyPath == "" || m.readyPeriod <= 0 ||
			m.readyTimeout <= 0 || m.readyFailures <= 0 || len(m.env) == 0 {
			t.Fatalf("%s: the server's pod lacks what the kubelet model needs: %+v", deploymentManifest, m)
		}
		return m
	}
	t.Fatalf("%s: no container named server", deploymentManifest)
	return podManifest{}
}
