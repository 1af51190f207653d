package trellis_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/trellistest"
)

// TestBadAdminQuery: a query string that does not parse is a 400 naming
// the parameter, once the token has been checked; before, limit=%ZZ was
// dropped by url.Values and the default limit served.
func TestBadAdminQuery(t *testing.T) {
	ts := startAdmin(t, adminToken)
	tests := []struct {
		name  string // case name
		query string // the raw query of GET /admin/timers
		field string // the parameter the 400 names
	}{
		{name: "bad escape in a value", query: "limit=%ZZ", field: "limit"},
		{name: "truncated escape", query: "name=abc%2", field: "name"},
		{name: "bad escape after a good pair", query: "limit=5&cursor=%G1", field: "cursor"},
		{name: "semicolon", query: "limit=5;name=x", field: "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := adminDo(t, ts, http.MethodGet, "/admin/timers?"+tt.query, "Bearer "+adminToken)
			if resp.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.Status, resp.Body)
			}
			if p := resp.Problem(t); len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
				t.Fatalf("problem %s: want one error naming %q", resp.Body, tt.field)
			}
		})
	}
	// Without the token, the token is what is wrong.
	if resp := adminDo(t, ts, http.MethodGet, "/admin/timers?limit=%ZZ", ""); resp.Status != http.StatusUnauthorized {
		t.Fatalf("no token, bad query: %d %s, want 401", resp.Status, resp.Body)
	}
}

// TestHeadOnGetRoutes: HEAD is served wherever GET is, with GET's status
// and headers and no body.
func TestHeadOnGetRoutes(t *testing.T) {
	ts := startAdmin(t, adminToken)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/admin/openapi.yaml", "/admin/timers", "/admin/timers/stats"} {
		t.Run(path, func(t *testing.T) {
			get := adminDo(t, ts, http.MethodGet, path, "Bearer "+adminToken)
			head := adminDo(t, ts, http.MethodHead, path, "Bearer "+adminToken)
			if head.Status != get.Status || head.Status != http.StatusOK || len(head.Body) != 0 ||
				head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
				t.Fatalf("HEAD %d %q (%d bytes); GET %d %q: want GET's status and type, no body",
					head.Status, head.Header.Get("Content-Type"), len(head.Body), get.Status, get.Header.Get("Content-Type"))
			}
		})
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

// TestReadyzQuotesRedis: a service started while its Redis was down, on a
// database that Redis then turns out not to have, says so in /readyz.
func TestReadyzQuotesRedis(t *testing.T) {
	port := trellistest.FreePort(t)
	ts := start(t, &counterApp{},
		trellistest.WithRedisURL("redis://127.0.0.1:"+strconv.Itoa(port)+"/5"), trellistest.WithStorePrefix("readyz-quotes"))
	trellistest.StartRedisServerOn(t, port, "--databases", "2")
	var last *trellistest.Response
	trellistest.Eventually(t, 10*time.Second, "/readyz to quote Redis", func() bool {
		last = ts.Get(t, "/readyz")
		return last.Status == http.StatusServiceUnavailable && strings.Contains(string(last.Body), "DB index is out of range")
	})
	if last.Header.Get("Retry-After") == "" {
		t.Fatalf("no Retry-After on /readyz's 503")
	}
}
