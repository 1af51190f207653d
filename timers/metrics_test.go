package timers

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsExposed: the collector registers on a registry and exposes the
// trellis_timers_… series, with the store-wide gauges read at scrape time.
func TestMetricsExposed(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			s := newScheduler(t, newStore(t, kind, nil), newRecorder(nil), Config{MaxActive: 10})
			reg := prometheus.NewPedanticRegistry()
			if err := reg.Register(s.Collector()); err != nil {
				t.Fatalf("Register: %v", err)
			}
			mustCreate(t, s, "a", time.Minute, testCall(`1`))
			mustCreate(t, s, "b", time.Hour, testCall(`1`))
			s.metrics.fired.WithLabelValues(resultSuccess).Inc()
			s.metrics.lateness.Observe(0.01)
			s.metrics.callDuration.WithLabelValues(resultSuccess).Observe(0.001)
			families, err := reg.Gather()
			if err != nil {
				t.Fatalf("Gather: %v", err)
			}
			var names []string
			for _, f := range families {
				names = append(names, f.GetName())
			}
			for _, want := range []string{
				"trellis_timers_active", "trellis_timers_failing", "trellis_timers_limit", "trellis_timers_due_within_1m",
				"trellis_timers_fired_total", "trellis_timers_retries_total", "trellis_timers_given_up_total",
				"trellis_timers_lease_expired_runs_total",
				"trellis_timers_lateness_seconds", "trellis_timers_call_duration_seconds", "trellis_timers_store_wiped",
				"trellis_timers_in_flight", "trellis_timers_created_total", "trellis_timers_store_up",
			} {
				if !slices.Contains(names, want) {
					t.Errorf("series %s missing; have %v", want, names)
				}
			}
			if n := testutil.ToFloat64(s.metrics.created); n != 2 {
				t.Errorf("created_total = %v, want 2", n)
			}
			for _, f := range families {
				if f.GetName() == "trellis_timers_active" && f.GetMetric()[0].GetGauge().GetValue() != 2 {
					t.Errorf("trellis_timers_active = %v, want 2", f.GetMetric()[0].GetGauge().GetValue())
				}
			}
		})
	}
}
