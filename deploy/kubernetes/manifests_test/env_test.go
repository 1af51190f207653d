package manifests

import (
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/tracing"
)

// podIP is the address the downward API gives a pod, in these tests.
const podIP = "10.1.2.3"

// testSecrets are the values the tests give the Secret's keys: never
// values from a manifest.
var testSecrets = map[string]string{
	"cluster-secret":    "0123456789abcdef0123456789abcdef-test",
	"admin-token":       "test-admin-token-0123456789",
	"redis-url":         "redis://:pw@redis.example.internal:6379/0",
	"redis-cluster-url": "redis://:pw@redis-0.example.internal:6379?addr=redis-1.example.internal:6379",
}

// runtimeVars are read by the Go runtime the binary is built with.
var runtimeVars = map[string]bool{"GOMEMLIMIT": true, "GOMAXPROCS": true, "GOGC": true}

// ref is a $(NAME) reference in an env value, which Kubernetes expands.
var ref = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// readVars is every variable the binary reads: Trellis's settings (each
// one ConfigFromEnv asks for) and the tracing pipeline's OTEL_* ones,
// found by asking them with a getenv that records its calls, and the
// OTEL_* ones the SDK reads itself.
func readVars(t *testing.T) map[string]bool {
	t.Helper()
	read := map[string]bool{}
	spy := func(name string) string { read[name] = true; return "" }
	if _, err := trellis.ConfigFromEnv(spy, nil); err != nil {
		t.Fatalf("the default configuration: %v", err)
	}
	if _, err := tracing.ReadEnv(spy); err != nil {
		t.Fatalf("tracing off: %v", err)
	}
	for _, must := range []string{trellis.EnvClusterSecret, trellis.EnvClusterAdvertiseAddr, tracing.EnvEndpoint} {
		if !read[must] {
			t.Fatalf("the spy did not see %s read: it does not see what the binary reads", must)
		}
	}
	// The OpenTelemetry SDK reads the rest of the OTEL_* variables itself
	// (the resource, headers, batching): those docs/observability.md's
	// table names.
	doc, err := os.ReadFile("../../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `OTEL_") {
			for _, m := range otelVar.FindAllString(line, -1) {
				read[m] = true
			}
		}
	}
	if !read[tracing.EnvServiceName] {
		t.Fatalf("docs/observability.md's table does not name %s: its format changed", tracing.EnvServiceName)
	}
	return read
}

// otelVar is an OpenTelemetry variable's name.
var otelVar = regexp.MustCompile(`OTEL_[A-Z_]*[A-Z]`)

// resolve is the container's environment as Kubernetes would give it to
// the process: secrets from testSecrets, the pod's IP, the memory limit,
// and $(NAME) references expanded from the variables before them.
func resolve(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch src := e.ValueFrom; {
		case src == nil:
			env[e.Name] = ref.ReplaceAllStringFunc(e.Value, func(m string) string {
				name := ref.FindStringSubmatch(m)[1]
				v, ok := env[name]
				if !ok {
					t.Errorf("%s refers to %s, which is not set before it", e.Name, m)
				}
				return v
			})
		case src.SecretKeyRef != nil:
			env[e.Name] = testSecrets[src.SecretKeyRef.Key]
		case src.FieldRef != nil && src.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = podIP
		case src.ResourceFieldRef != nil:
			q := c.Resources.Limits[corev1.ResourceName(src.ResourceFieldRef.Resource[len("limits."):])]
			env[e.Name] = strconv.FormatInt(q.Value(), 10)
		default:
			t.Errorf("%s: a source this test does not resolve: %+v", e.Name, src)
		}
	}
	return env
}

// containers is the server's container of each overlay, and of the Redis
// Cluster patch of the production overlay.
func containers(t *testing.T) map[string]corev1.Container {
	t.Helper()
	cs := map[string]corev1.Container{}
	for _, dir := range overlays {
		cs[dir] = server(t, build(t, dir))
	}
	// The Redis Cluster variant: production's container with the patch's
	// variable in place of TRELLIS_REDIS_URL.
	patch := server(t, decodeFile(t, "overlays/production/redis-cluster-url.yaml"))
	prod := cs["overlays/production"]
	c := *prod.DeepCopy()
	for i, e := range c.Env {
		if e.Name == trellis.EnvRedisURL {
			c.Env[i] = patch.Env[0]
		}
	}
	cs["overlays/production+redis-cluster-url"] = c
	return cs
}

// TestEnvNamesAreRead: every variable the manifests set is one the binary
// reads, or one another variable refers to as $(NAME).
func TestEnvNamesAreRead(t *testing.T) {
	read := readVars(t)
	for name, c := range containers(t) {
		t.Run(name, func(t *testing.T) {
			referred := map[string]bool{}
			for _, e := range c.Env {
				for _, m := range ref.FindAllStringSubmatch(e.Value, -1) {
					referred[m[1]] = true
				}
			}
			seen := map[string]bool{}
			for _, e := range c.Env {
				if seen[e.Name] {
					t.Errorf("%s is set twice", e.Name)
				}
				seen[e.Name] = true
				if !read[e.Name] && !runtimeVars[e.Name] && !referred[e.Name] {
					t.Errorf("%s: the server reads no such variable", e.Name)
				}
			}
		})
	}
}

// TestConfigIsValid: the environment each overlay gives the server is a
// valid configuration, on a Redis, whose ports are the container's and
// whose advertised cluster address is the pod's own IP.
func TestConfigIsValid(t *testing.T) {
	for name, c := range containers(t) {
		t.Run(name, func(t *testing.T) {
			env := resolve(t, c)
			cfg, err := trellis.ConfigFromEnv(func(k string) string { return env[k] }, nil)
			if err != nil {
				t.Fatalf("the server would not start: %v", err)
			}
			if cfg.RedisURL == "" && cfg.RedisClusterURL == "" {
				t.Error("no Redis: each pod would keep its own state in memory")
			}
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			adv := env[trellis.EnvClusterAdvertiseAddr]
			host, advPort, err := net.SplitHostPort(adv)
			if err != nil || host != podIP {
				t.Errorf("%s = %q: want the pod's IP and the cluster port", trellis.EnvClusterAdvertiseAddr, adv)
			}
			for _, tt := range []struct{ port, addr string }{
				{"http", cfg.HTTPAddr},
				{"cluster", cfg.ClusterAddr},
				{"cluster", net.JoinHostPort("", advPort)},
			} {
				if got, want := strconv.Itoa(int(ports[tt.port])), port(t, tt.addr); got != want {
					t.Errorf("containerPort %s is %s, the server listens (or is reached) on %s (%s)", tt.port, got, want, tt.addr)
				}
			}
		})
	}
}

// port is the port of a listen address.
func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return p
}
