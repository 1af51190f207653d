package views

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector is the runner's Prometheus series: each view's lag on each
// shard this instance projects.
type collector struct {
	r        *Runner
	lag, age *prometheus.Desc
}

// Collector is the runner's series, for the service's registry.
func (r *Runner) Collector() prometheus.Collector {
	return &collector{r: r,
		lag: prometheus.NewDesc("trellis_view_lag_changes",
			"Changes recorded in a shard this instance projects and not applied to the view yet, by view and shard.", []string{"view", "shard"}, nil),
		age: prometheus.NewDesc("trellis_view_lag_seconds",
			"Age of the oldest change not applied to the view yet, by view and shard this instance projects (0: none).", []string{"view", "shard"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.age
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, l := range c.r.Lag() {
		age := 0.0
		if !l.Oldest.IsZero() {
			age = max(now.Sub(l.Oldest).Seconds(), 0)
		}
		shard := strconv.Itoa(l.Shard)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(l.Changes), l.View, shard)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, l.View, shard)
	}
}
