package consumers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the runner's Prometheus series.
type metrics struct {
	r     *Runner
	calls *prometheus.CounterVec
	deads *prometheus.CounterVec
	lag   *prometheus.Desc
	age   *prometheus.Desc
}

func newMetrics(r *Runner) *metrics {
	return &metrics{
		r: r,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_consumer_changes_total",
			Help: "Handler calls on this instance, by consumer and outcome (done, ignored, failed)."},
			[]string{"consumer", "outcome"}),
		deads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_consumer_dead_letters_total",
			Help: "Changes that ran out of retries on this instance, by consumer."}, []string{"consumer"}),
		lag: prometheus.NewDesc("trellis_consumer_lag_changes",
			"Changes recorded in the shards this instance consumes and not handled yet, by consumer.", []string{"consumer"}, nil),
		age: prometheus.NewDesc("trellis_consumer_lag_seconds",
			"Age of the oldest change not handled yet in the shards this instance consumes, by consumer (0: none).", []string{"consumer"}, nil),
	}
}

// Collector is the runner's series, for the service's registry.
func (r *Runner) Collector() prometheus.Collector { return r.metrics }

func (m *metrics) handled(consumer string, ignored bool, err error) {
	outcome := "done"
	switch {
	case err != nil:
		outcome = "failed"
	case ignored:
		outcome = "ignored"
	}
	m.calls.WithLabelValues(consumer, outcome).Inc()
}

func (m *metrics) dead(consumer string) { m.deads.WithLabelValues(consumer).Inc() }

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.deads.Describe(ch)
	ch <- m.lag
	ch <- m.age
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.calls.Collect(ch)
	m.deads.Collect(ch)
	now := time.Now()
	for id, l := range m.r.Lag() {
		age := 0.0
		if !l.Oldest.IsZero() {
			age = max(now.Sub(l.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, float64(l.Changes), id)
		ch <- prometheus.MustNewConstMetric(m.age, prometheus.GaugeValue, age, id)
	}
}
