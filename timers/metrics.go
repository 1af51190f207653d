package timers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the scheduler's Prometheus series. Counters and histograms
// are this instance's; the store-wide gauges (active, failing, due within a
// minute, dead letters) are read from the store at scrape time, so every instance reports
// the same store-wide values and no instance has to keep them in step.
type metrics struct {
	s *Scheduler

	created, deleted prometheus.Counter
	fired            *prometheus.CounterVec
	firedOK          prometheus.Counter // fired's success series, bound once: it counts nearly every call
	retries          prometheus.Counter
	givenUp          prometheus.Counter
	deadRetried      prometheus.Counter
	deadPruned       prometheus.Counter
	leaseExpired     prometheus.Counter
	lateness         prometheus.Histogram
	callDuration     *prometheus.HistogramVec
	callDurationOK   prometheus.Observer // callDuration's success series, bound once
	inFlight         prometheus.Gauge
	wiped            prometheus.Gauge

	active, failing, limit, dueSoon, dead, storeUp *prometheus.Desc
}

const ns, sub = "trellis", "timers"

func newMetrics(s *Scheduler) *metrics {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, sub, name), help, nil, nil)
	}
	m := &metrics{
		s: s,
		created: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "created_total",
			Help: "Timers created (or replaced) through this instance."}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "deleted_total",
			Help: "Timer deletions through this instance."}),
		fired: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "fired_total",
			Help: "Timer calls made by this instance, by result: success, error (the callee's error effect), timeout, " +
				"unknown_component, unknown_method, bad_argument, panic, failure, cancelled (by shutdown)."}, []string{"result"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Failed timer calls rescheduled with backoff."}),
		givenUp: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "given_up_total",
			Help: "Timers moved to the dead letters after their last allowed retry failed."}),
		deadRetried: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "dead_letters_retried_total",
			Help: "Dead letters run again (made active timers) through this instance."}),
		deadPruned: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "dead_letters_pruned_total",
			Help: "Dead letters this instance removed once their retention passed."}),
		leaseExpired: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "lease_expired_runs_total",
			Help: "Timer calls this instance started because the lease of the timer's previous call expired with no outcome " +
				"(its instance died, stalled or could not reach the store): each may repeat a call that ran."}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "lateness_seconds",
			Help:    "Time from a timer's due time to the start of its call.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "call_duration_seconds",
			Help:    "Duration of timer calls, by result.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"result"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "in_flight",
			Help: "Timer calls running on this instance."}),
		wiped: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "store_wiped",
			Help: "1 when this instance found the timer store wiped (its marker key gone): timers were lost."}),
		active:  desc("active", "Timers in the store (all instances)."),
		failing: desc("failing", "Timers in the store whose last call failed."),
		limit:   desc("limit", "The configured maximum of active timers."),
		dueSoon: desc("due_within_1m", "Timers due within the next minute, those overdue included."),
		dead:    desc("dead_letters", "Timers that gave up, kept as dead letters (not counted toward the limit)."),
		storeUp: desc("store_up", "1 when the store answered this scrape's query for the gauges."),
	}
	m.firedOK, m.callDurationOK = m.fired.WithLabelValues(resultSuccess), m.callDuration.WithLabelValues(resultSuccess)
	return m
}

// called counts a call that ended with result label, which took elapsed.
func (m *metrics) called(label string, elapsed time.Duration) {
	if label == resultSuccess {
		m.firedOK.Inc()
		m.callDurationOK.Observe(elapsed.Seconds())
		return
	}
	m.fired.WithLabelValues(label).Inc()
	m.callDuration.WithLabelValues(label).Observe(elapsed.Seconds())
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.created, m.deleted, m.fired, m.retries, m.givenUp, m.deadRetried, m.deadPruned, m.leaseExpired, m.lateness,
		m.callDuration, m.inFlight, m.wiped}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{m.active, m.failing, m.limit, m.dueSoon, m.dead, m.storeUp} {
		ch <- d
	}
}

// storeScrapeTimeout bounds the store query of one scrape.
const storeScrapeTimeout = 2 * time.Second

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	ch <- prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, float64(m.s.cfg.MaxActive))
	ctx, cancel := context.WithTimeout(context.Background(), storeScrapeTimeout)
	defer cancel()
	st, err := m.s.store.stats(ctx)
	if err != nil {
		// The gauges are left out rather than reported as 0, which would
		// read as "no timers"; store_up says why they are missing.
		ch <- prometheus.MustNewConstMetric(m.storeUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(m.storeUp, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(m.active, prometheus.GaugeValue, float64(st.active))
	ch <- prometheus.MustNewConstMetric(m.failing, prometheus.GaugeValue, float64(st.failing))
	ch <- prometheus.MustNewConstMetric(m.dueSoon, prometheus.GaugeValue, float64(st.dueWithin1m))
	ch <- prometheus.MustNewConstMetric(m.dead, prometheus.GaugeValue, float64(st.dead))
}
