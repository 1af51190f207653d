package admin_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// acknowledgePath is the admin operation that acknowledges a wiped store.
const acknowledgePath = "/admin/timers/wipe/acknowledge"

// TestAcknowledgeWipeOverHTTP: a Redis that loses the timers' marker key
// keeps /readyz at 503, with the wipe dated on the service's clock, until
// the operator acknowledges it through the admin API (with the token);
// then /readyz is 200 again, the markers are back and the metric is 0.
func TestAcknowledgeWipeOverHTTP(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken, trellistest.WithRedisURL(trellistest.RedisURL(t)))
	if r := ts.Get(t, "/readyz"); r.Status != http.StatusOK {
		t.Fatalf("/readyz before the wipe: %d %s", r.Status, r.Body)
	}

	// Far from the wall clock, so that a wipe dated on it would show. The
	// scheduler may notice the wipe as soon as the markers are gone (a
	// claim of its start may still be in flight), so the clock is moved
	// before they go as well as after.
	ts.Clock.Advance(48 * time.Hour)
	from := ts.Clock.Now()

	// What FLUSHALL would do to this service, without touching the other
	// tests' keys on the shared Redis.
	rdb := trellistest.Redis(t)
	markers, err := rdb.Keys(context.Background(), ts.Host().Config.RedisPrefix+":timers:*:marker").Result()
	if err != nil || len(markers) == 0 {
		t.Fatalf("the timer markers: %v, %v", markers, err)
	}
	if err := rdb.Del(context.Background(), markers...).Err(); err != nil {
		t.Fatal(err)
	}
	// The scheduler looks at the marker when it wakes, which this does.
	ts.Clock.Advance(48 * time.Hour)
	var wiped *timers.WipedError
	trellistest.Eventually(t, 10*time.Second, "the scheduler notices the wipe", func() bool {
		return errors.As(ts.Host().Timers.Ready(context.Background()), &wiped)
	})
	if to := ts.Clock.Now(); wiped.DetectedAt.Before(from) || wiped.DetectedAt.After(to) {
		t.Errorf("the wipe is dated %v, want the service's clock, between %v and %v", wiped.DetectedAt, from, to)
	}
	r := ts.Get(t, "/readyz")
	if p := r.Problem(t); r.Status != http.StatusServiceUnavailable || !strings.Contains(p.Detail, "wiped") {
		t.Fatalf("/readyz after the wipe: %d %q, want 503 saying the store was wiped", r.Status, p.Detail)
	}

	refusals := []struct {
		name   string // the case
		authz  string // the Authorization header ("" none)
		status int    // the answer
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "Bearer not-the-admin-token-at-all", http.StatusUnauthorized},
	}
	for _, tc := range refusals {
		if r := fixture.Send(t, ts, http.MethodPost, acknowledgePath, tc.authz); r.Status != tc.status {
			t.Errorf("acknowledge with %s: %d %s, want %d", tc.name, r.Status, r.Body, tc.status)
		}
	}
	if r := ts.Get(t, "/readyz"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz after refused acknowledgements: %d, want 503 still", r.Status)
	}

	if r := fixture.Admin(t, ts, http.MethodPost, acknowledgePath); r.Status != http.StatusNoContent {
		t.Fatalf("acknowledge: %d %s, want 204", r.Status, r.Body)
	}
	if r := ts.Get(t, "/readyz"); r.Status != http.StatusOK {
		t.Fatalf("/readyz after the acknowledgement: %d %s, want 200", r.Status, r.Body)
	}
	if n, err := rdb.Exists(context.Background(), markers...).Result(); err != nil || n != int64(len(markers)) {
		t.Errorf("the markers after the acknowledgement: %d of %d exist, %v; want every one written again", n, len(markers), err)
	}
	if m := ts.Get(t, "/metrics"); !strings.Contains(string(m.Body), "\ntrellis_timers_store_wiped 0\n") {
		t.Errorf("/metrics after the acknowledgement has no trellis_timers_store_wiped 0")
	}
	// Acknowledging again, with nothing wiped, changes nothing.
	if r := fixture.Admin(t, ts, http.MethodPost, acknowledgePath); r.Status != http.StatusNoContent {
		t.Errorf("acknowledge again: %d %s, want 204", r.Status, r.Body)
	}
}
