package console

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/timers"
)

// openAuth lets every request through: these tests are about the store's
// state; the admin token's middleware is tested with the whole service.
func openAuth(next http.Handler) http.Handler { return next }

// overviewOf serves the console over loopback and asks it for the
// overview: the status, the Retry-After header and the decoded body.
func overviewOf(t *testing.T, o Options) (int, string, map[string]any) {
	t.Helper()
	o.Auth, o.Enabled = openAuth, true
	srv := httptest.NewServer(New(o))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), body
}

// stateIn is the store state an overview body reports.
func stateIn(body map[string]any) string {
	st, _ := body["store"].(map[string]any)
	s, _ := st["state"].(string)
	return s
}

func TestNewNeedsItsParts(t *testing.T) {
	sched, _ := newScheduler(t)
	cases := []struct {
		name string  // what is missing
		o    Options // the options New gets
	}{
		{name: "timers", o: Options{Store: entities.NewMemoryStore(), Auth: openAuth}},
		{name: "store", o: Options{Timers: sched, Auth: openAuth}},
		{name: "auth", o: Options{Timers: sched, Store: entities.NewMemoryStore()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("New without %s did not panic", c.name)
				}
			}()
			New(c.o)
		})
	}
}

func TestOverviewNotRunning(t *testing.T) {
	sched, _ := newScheduler(t)
	status, _, body := overviewOf(t, Options{Timers: sched, Store: entities.NewMemoryStore()})
	if status != http.StatusOK || stateIn(body) != StateNotRunning {
		t.Fatalf("overview of a scheduler never started: %d %v, want 200 %q", status, body, StateNotRunning)
	}
}

// TestOverviewUnreachable: a store that does not answer is a 503 with
// Retry-After and a problem that says which store.
func TestOverviewUnreachable(t *testing.T) {
	// Port 1 on loopback: nothing listens there, the dial is refused at once.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = client.Close() })
	sched, err := timers.New(timers.NewRedisStore(client, "unreachable"), components.NewClient(components.NewRegistry()), timers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	status, retry, body := overviewOf(t, Options{Timers: sched, Store: entities.NewRedisStore(client, "unreachable")})
	if status != http.StatusServiceUnavailable || retry != "5" || body["detail"] != "the state store is not reachable" {
		t.Fatalf("overview with Redis down: %d Retry-After %q %v, want 503, 5 and the state store named", status, retry, body)
	}
}

// TestOverviewWiped: a Redis that lost the timers' marker key shows as
// wiped, with the scheduler's explanation, until acknowledged.
func TestOverviewWiped(t *testing.T) {
	rdb := testenv.Redis(t)
	prefix := "trellis-console-test-" + rand.Text()
	t.Cleanup(func() {
		keys, err := rdb.Keys(context.Background(), prefix+":*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(context.Background(), keys...).Err()
		}
		if err != nil {
			t.Errorf("remove the keys under %s: %v", prefix, err)
		}
	})
	sched, err := timers.New(timers.NewRedisStore(rdb, prefix), components.NewClient(components.NewRegistry()),
		timers.Config{IdleCheck: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sched.Shutdown(ctx); err != nil {
			t.Errorf("stop the scheduler: %v", err)
		}
	})
	o := Options{Timers: sched, Store: entities.NewRedisStore(rdb, prefix)}
	if status, _, body := overviewOf(t, o); status != http.StatusOK || stateIn(body) != StateOK {
		t.Fatalf("overview of a running scheduler: %d %v, want 200 %q", status, body, StateOK)
	}

	// What FLUSHALL would do to this scheduler, without touching the
	// other tests' keys on the shared Redis.
	marker := wipeMarkers(t, rdb, prefix)
	testenv.Eventually(t, 10*time.Second, "the scheduler noticed the wipe", func() bool {
		return sched.Ready(context.Background()) != nil
	})
	status, _, body := overviewOf(t, o)
	detail, _ := body["store"].(map[string]any)["detail"].(string)
	if status != http.StatusOK || stateIn(body) != StateWiped || !strings.Contains(detail, marker) {
		t.Fatalf("overview after a wipe: %d %v, want 200 %q with why", status, body, StateWiped)
	}
	if !strings.Contains(detail, acknowledgeRoute) {
		t.Errorf("the wiped store's detail %q does not say how to acknowledge it (%s)", detail, acknowledgeRoute)
	}

	if err := sched.AcknowledgeWipe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if status, _, body := overviewOf(t, o); status != http.StatusOK || stateIn(body) != StateOK {
		t.Fatalf("overview after the wipe was acknowledged: %d %v, want 200 %q", status, body, StateOK)
	}
}
