package trellis_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// TestConfigRedisClusterURL pins TRELLIS_REDIS_CLUSTER_URL and its flag:
// a go-redis cluster URL selects a cluster; one Redis and a cluster both
// set is refused naming both settings; a malformed URL is refused naming
// the variable and never echoing a password.
func TestConfigRedisClusterURL(t *testing.T) {
	const cluster = "redis://10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000"
	tests := []struct {
		name    string            // case name
		env     map[string]string // the environment
		args    []string          // command-line flags
		want    string            // RedisClusterURL configured, when accepted
		wantErr []string          // substrings of the error (nil: accepted)
	}{
		{name: "by variable", env: map[string]string{"TRELLIS_REDIS_CLUSTER_URL": cluster}, want: cluster},
		{name: "by flag", args: []string{"-redis-cluster-url", cluster}, want: cluster},
		{name: "unset", want: ""},
		{name: "both set", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_REDIS_CLUSTER_URL": cluster},
			wantErr: []string{"TRELLIS_REDIS_CLUSTER_URL", "TRELLIS_REDIS_URL", "not both"}},
		{name: "both set, one by flag", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0"},
			args: []string{"-redis-cluster-url", cluster}, wantErr: []string{"TRELLIS_REDIS_CLUSTER_URL", "TRELLIS_REDIS_URL"}},
		{name: "not a URL", env: map[string]string{"TRELLIS_REDIS_CLUSTER_URL": "redis://u:s3cret@10.0.0.1:7000?dial_timeout=soon"},
			wantErr: []string{"TRELLIS_REDIS_CLUSTER_URL (-redis-cluster-url): not a valid Redis Cluster URL"}},
		{name: "unknown scheme", env: map[string]string{"TRELLIS_REDIS_CLUSTER_URL": "http://10.0.0.1:7000"},
			wantErr: []string{"not a valid Redis Cluster URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := trellis.ConfigFromEnv(func(k string) string { return tt.env[k] }, tt.args)
			if tt.wantErr == nil {
				if err != nil || cfg.RedisClusterURL != tt.want {
					t.Fatalf("RedisClusterURL %q, err %v; want %q", cfg.RedisClusterURL, err, tt.want)
				}
				return
			}
			var ce *trellis.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("err = %v shows the password", err)
			}
		})
	}
}

// TestServiceOnRedisCluster: the service configured with a cluster URL
// serves entities from it, with their keys spread over all 3 masters, and
// is ready (its store check pings every master).
func TestServiceOnRedisCluster(t *testing.T) {
	prefix := "trellis-test-" + rand.Text()
	client := testenv.RedisCluster(t)
	t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
	url := testenv.RedisClusterURL(t)
	ts := fixture.StartCounter(t, &fixture.CounterApp{}, trellistest.WithStorePrefix(prefix),
		trellistest.WithConfig(func(c *trellis.Config) { c.RedisClusterURL = url }))

	const n = 300
	for i := range n {
		c := fixture.Counter(t, ts.Post(t, fmt.Sprintf("/counters/c-%d/increase", i), map[string]int{"by": i + 1}))
		if c.Value != int64(i+1) {
			t.Fatalf("counter c-%d = %d, want %d", i, c.Value, i+1)
		}
	}
	if c := fixture.Counter(t, ts.Get(t, "/counters/c-7")); c.Value != 8 {
		t.Fatalf("counter c-7 = %d, want 8", c.Value)
	}
	if resp := ts.Get(t, "/readyz"); resp.Status != http.StatusOK {
		t.Fatalf("/readyz = %d: %s", resp.Status, resp.Body)
	}
	shares := testenv.KeysPerMaster(t, client, prefix+":entity:*")
	if len(shares) != 3 {
		t.Fatalf("entity keys per master = %v", shares)
	}
	total := 0
	for _, k := range shares {
		total += k
	}
	for addr, k := range shares {
		if share := float64(k) / float64(total); share < 0.2 || share > 0.5 {
			t.Errorf("master %s holds %.0f %% of the entities (all: %v)", addr, 100*share, shares)
		}
	}
	if !strings.Contains(ts.Logs(), `"cluster"`) {
		t.Errorf("the start-up log does not say the store is a cluster")
	}
}

// redisURLWithDB is the test Redis's URL with another database index.
func redisURLWithDB(t *testing.T, db string) string {
	t.Helper()
	opts, err := redis.ParseURL(trellistest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	return "redis://" + opts.Addr + "/" + db
}

// TestRedisDBOutOfRange: a database index the Redis does not have is
// refused at start-up, quoting Redis, as a *ConfigError (exit code 2 from
// Run), instead of a service that retries forever.
func TestRedisDBOutOfRange(t *testing.T) {
	cfg := trellis.Config{RedisURL: redisURLWithDB(t, "100")}
	svc, err := trellis.New(cfg, func(*trellis.Host, chi.Router) error { return nil }, trellis.WithLogger(slog.New(slog.DiscardHandler)))
	if err == nil {
		_ = svc.Shutdown(context.Background())
		t.Fatal("New accepted database 100 of a Redis with 16")
	}
	var ce *trellis.ConfigError
	if !errors.As(err, &ce) || ce.Var != trellis.EnvRedisURL || !strings.Contains(err.Error(), "DB index is out of range") {
		t.Fatalf("New: %v; want a *ConfigError on %s quoting Redis", err, trellis.EnvRedisURL)
	}
}
