package manifests

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trellis-go/trellis"
)

// TestProbesAnswer starts the server on a Redis that does not answer, as
// a pod whose Redis is down, and asks the manifests' probe paths over
// HTTP: liveness must pass (a restart would not bring Redis back) while
// readiness fails; and on a store that answers, readiness passes.
func TestProbesAnswer(t *testing.T) {
	c := server(t, build(t, "overlays/dev"))
	if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Fatal("the server needs an HTTP liveness and readiness probe")
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if got := p.HTTPGet.Port; got != intstr.FromString("http") {
			t.Errorf("probe %s on port %v, want the named port http", p.HTTPGet.Path, got.String())
		}
	}
	tests := []struct {
		name        string
		redisDown   bool
		live, ready int
	}{
		{"store answers", false, http.StatusOK, http.StatusOK},
		{"Redis down", true, http.StatusOK, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := startServer(t, tt.redisDown)
			for _, p := range []struct {
				probe *corev1.Probe
				want  int
			}{{c.LivenessProbe, tt.live}, {c.ReadinessProbe, tt.ready}} {
				if got := get(t, base+p.probe.HTTPGet.Path, time.Duration(p.probe.TimeoutSeconds)*time.Second); got != p.want {
					t.Errorf("GET %s: %d, want %d", p.probe.HTTPGet.Path, got, p.want)
				}
			}
		})
	}
}

// startServer starts a service with no components on a loopback port: in
// memory, or on a Redis at a port nothing listens on. It stops with t.
func startServer(t *testing.T, redisDown bool) string {
	t.Helper()
	cfg := trellis.DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	if redisDown {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.RedisURL = "redis://" + ln.Addr().String() + "/0"
		ln.Close()
		cfg.ClusterAddr = "127.0.0.1:0"
		cfg.ClusterSecret = testSecrets["cluster-secret"]
	}
	svc, err := trellis.New(cfg, func(*trellis.Host, chi.Router) error { return nil },
		trellis.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return "http://" + svc.Addr().String()
}

// get is the status of GET url within the probe's timeout.
func get(t *testing.T, url string, timeout time.Duration) int {
	t.Helper()
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestLifecycle: the rollout, the disruption budget, the grace period and
// the pod's confinement are what docs/operations.md#kubernetes says, in
// every overlay.
func TestLifecycle(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			d := find[appsv1.Deployment](t, objs, "trellis")
			pod := d.Spec.Template.Spec
			c := server(t, objs)

			ru := d.Spec.Strategy.RollingUpdate
			if ru == nil || ru.MaxUnavailable.String() != "0" || ru.MaxSurge.String() != "1" {
				t.Errorf("rolling update %+v: want maxUnavailable 0, maxSurge 1", ru)
			}
			pdb := find[policyv1.PodDisruptionBudget](t, objs, "trellis")
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" {
				t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
			}
			// The grace period covers the preStop pause and the whole
			// shutdown, with a margin, before the SIGKILL.
			pause := time.Duration(0)
			if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
				pause = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
			} else {
				t.Error("no preStop sleep: the proxies would still send requests to a closed port")
			}
			need := pause + trellis.DefaultConfig().ShutdownTimeout
			if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= need {
				t.Errorf("terminationGracePeriodSeconds %v: want more than %v (preStop %v + shutdown timeout)", g, need, pause)
			}
			if c.LivenessProbe.HTTPGet.Path == c.ReadinessProbe.HTTPGet.Path {
				t.Error("liveness and readiness ask the same path: a Redis outage would restart every pod")
			}

			if ps := pod.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
				t.Error("the pod may run as root")
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Error("the pod mounts a service account token it has no use for")
			}
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Fatal("the server has no securityContext")
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Error("privilege escalation allowed")
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Error("the root filesystem is writable")
			case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
				t.Error("capabilities are not all dropped")
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("no %s request", r)
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					t.Errorf("no %s limit", r)
				}
			}

			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			ann := d.Spec.Template.Annotations
			if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" ||
				ann["prometheus.io/port"] != strconv.Itoa(int(ports["http"])) {
				t.Errorf("scrape annotations %v: want /metrics on the http port %d", ann, ports["http"])
			}
			checkNetworkPolicy(t, find[networkingv1.NetworkPolicy](t, objs, "trellis"), d)
			checkSelectors(t, objs, d)
		})
	}
}

// checkSelectors: the Service, the budget and the autoscaler (where there
// is one) all reach the Deployment's pods, and the Service sends HTTP to
// the http port.
func checkSelectors(t *testing.T, objs []object, d *appsv1.Deployment) {
	t.Helper()
	own := d.Spec.Template.Labels
	svc := find[corev1.Service](t, objs, "trellis")
	if len(svc.Spec.Selector) == 0 || !matches(svc.Spec.Selector, own) {
		t.Errorf("the Service selects %v, not the server's pods %v", svc.Spec.Selector, own)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("the Service's ports %+v: want the http port alone (never the cluster port)", svc.Spec.Ports)
	}
	pdb := find[policyv1.PodDisruptionBudget](t, objs, "trellis")
	if pdb.Spec.Selector == nil || len(pdb.Spec.Selector.MatchLabels) == 0 || !matches(pdb.Spec.Selector.MatchLabels, own) {
		t.Errorf("the PodDisruptionBudget selects %v, not the server's pods", pdb.Spec.Selector)
	}
	for _, o := range objs {
		hpa, ok := o.value.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok {
			continue
		}
		ref := hpa.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.Name != d.Name {
			t.Errorf("the autoscaler scales %s %s, not the Deployment %s", ref.Kind, ref.Name, d.Name)
		}
		if hpa.Spec.MinReplicas == nil || d.Spec.Replicas == nil || *hpa.Spec.MinReplicas < *d.Spec.Replicas {
			t.Errorf("the autoscaler's minimum %v is below the Deployment's %v replicas", hpa.Spec.MinReplicas, d.Spec.Replicas)
		}
	}
}

// checkNetworkPolicy: the policy selects the server's pods, and lets only
// those pods reach the cluster port.
func checkNetworkPolicy(t *testing.T, np *networkingv1.NetworkPolicy, d *appsv1.Deployment) {
	t.Helper()
	own := d.Spec.Template.Labels
	if !matches(np.Spec.PodSelector.MatchLabels, own) {
		t.Errorf("the NetworkPolicy selects %v, not the server's pods %v", np.Spec.PodSelector.MatchLabels, own)
	}
	clusterRules := 0
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.String() != "cluster" {
				continue
			}
			clusterRules++
			if len(rule.From) == 0 {
				t.Error("the cluster port is open to every pod")
			}
			for _, from := range rule.From {
				if from.PodSelector == nil || from.NamespaceSelector != nil || from.IPBlock != nil ||
					!matches(from.PodSelector.MatchLabels, own) || len(from.PodSelector.MatchLabels) == 0 {
					t.Errorf("the cluster port is open to %+v, not only the server's pods", from)
				}
			}
		}
	}
	if clusterRules != 1 {
		t.Errorf("%d rules for the cluster port, want 1", clusterRules)
	}
}

// matches says whether a selector's labels are all among labels.
func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
