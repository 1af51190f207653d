package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-chi/chi/v5"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// TestMetrics: GET /metrics serves the service's registry in the
// Prometheus text format, without a token: the timer scheduler's series,
// the Go and process series, and the HTTP series labelled with the route
// pattern (never the raw path; unmatched requests share one label). Two
// services in one process each have their own registry.
func TestMetrics(t *testing.T) {
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) {
			ts := fixture.Start(t, fixture.AdminToken, sc.Opts(t)...)
			other := fixture.Start(t, fixture.AdminToken) // a second registry in the same process
			call, err := fixture.OK.Deferred(fixture.Order{Order: "m"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ts.Host().Timers.Create(context.Background(), "metrics-timer", time.Hour, call); err != nil {
				t.Fatal(err)
			}
			// Exactly one request of each kind the assertions count.
			if resp := fixture.Admin(t, ts, http.MethodGet, "/admin/timers/secret-order-4711"); resp.Status != http.StatusNotFound {
				t.Fatalf("GET a missing timer: %d", resp.Status)
			}
			if resp := ts.Get(t, "/counters/visits-4711"); resp.Status != http.StatusOK {
				t.Fatalf("GET a counter: %d", resp.Status)
			}
			if resp := ts.Get(t, "/no/such/route-4711"); resp.Status != http.StatusNotFound {
				t.Fatalf("GET an unknown route: %d", resp.Status)
			}
			if resp := ts.Do(t, "BREW", "/counters/visits-4711", nil); resp.Status != http.StatusMethodNotAllowed {
				t.Fatalf("BREW a counter: %d", resp.Status)
			}

			resp := ts.Get(t, "/metrics")
			if resp.Status != http.StatusOK {
				t.Fatalf("GET /metrics: %d %s", resp.Status, resp.Body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type %q, want the Prometheus text format", ct)
			}
			body := string(resp.Body)
			tests := []struct {
				name string // what the line shows
				line string // a line (or line prefix) the body must hold
			}{
				{"the timers' store-wide gauge", "trellis_timers_active 1\n"},
				{"the timers' limit", "trellis_timers_limit 50000\n"},
				{"the timers' counters", "trellis_timers_created_total 1\n"},
				{"the timers' lateness histogram", "# TYPE trellis_timers_lateness_seconds histogram"},
				{"an admin route by its pattern", `trellis_http_requests_total{code="404",method="GET",route="/admin/timers/{name}"} 1` + "\n"},
				{"an app route by its pattern", `trellis_http_requests_total{code="200",method="GET",route="/counters/{id}"} 1` + "\n"},
				{"an unknown route under one label", `trellis_http_requests_total{code="404",method="GET",route="unmatched"} 1` + "\n"},
				{"an unknown method under one label", `trellis_http_requests_total{code="405",method="OTHER",route="unmatched"} 1` + "\n"},
				{"the duration histogram", `trellis_http_request_duration_seconds_count{method="GET",route="/counters/{id}"} 1` + "\n"},
				{"the Go collector", "go_goroutines "},
				{"the process collector", "process_start_time_seconds "},
			}
			for _, tt := range tests {
				if !strings.Contains(body, tt.line) {
					t.Errorf("%s: no %q in\n%s", tt.name, tt.line, grepLines(body, "trellis_"))
				}
			}
			for _, raw := range []string{"secret-order-4711", "visits-4711", "route-4711", "BREW"} {
				if strings.Contains(body, raw) {
					t.Errorf("a raw path or method (%s) became a label", raw)
				}
			}

			// The other service counts only its own requests.
			if oresp := other.Get(t, "/metrics"); oresp.Status != http.StatusOK || strings.Contains(string(oresp.Body), "/counters/{id}") {
				t.Errorf("the other service's registry shows this one's requests: %d", oresp.Status)
			}
		})
	}
}

// grepLines keeps the lines of s that contain sub, for failure messages.
func grepLines(s, sub string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) && !strings.HasPrefix(line, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// TestMetricsPanicAndAppCollectors: a request whose handler panicked is
// counted with the 500 it got; an application's own collector, registered
// in Host.Metrics during setup, is served too.
func TestMetricsPanicAndAppCollectors(t *testing.T) {
	app := &fixture.CounterApp{PanicID: "boom"}
	appCounter := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_things_total", Help: "Things the app did."})
	ts := trellistest.Start(t, func(h *trellis.Host, r chi.Router) error {
		if err := h.Metrics.Register(appCounter); err != nil {
			return err
		}
		return app.Setup(h, r)
	})
	appCounter.Add(3)
	if resp := ts.Get(t, "/counters/boom"); resp.Status != http.StatusInternalServerError {
		t.Fatalf("GET a panicking route: %d", resp.Status)
	}
	body := string(ts.Get(t, "/metrics").Body)
	for _, line := range []string{
		`trellis_http_requests_total{code="500",method="GET",route="/counters/{id}"} 1` + "\n",
		"app_things_total 3\n",
	} {
		if !strings.Contains(body, line) {
			t.Errorf("no %q in\n%s", line, grepLines(body, "total"))
		}
	}
}
