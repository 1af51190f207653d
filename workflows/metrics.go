package workflows

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the workflows' Prometheus series, shared by the runners of
// a service (Runners.Collector).
type metrics struct {
	rs       *Runners // nil: a runner started without Runners (not collected)
	started  *prometheus.CounterVec
	ended    *prometheus.CounterVec
	steps    *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	instance *prometheus.Desc
}

func newMetrics(rs *Runners) *metrics {
	return &metrics{rs: rs,
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_workflow_started_total",
			Help: "Workflow instances started by a command on this instance, by workflow."}, []string{"workflow"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_workflow_ended_total",
			Help: "Workflow instances that ended on this instance, by workflow and outcome (ended, failed, cancelled, deleted)."},
			[]string{"workflow", "outcome"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "trellis_workflow_step_seconds",
			Help:    "Duration of the runs of a step on this instance, by workflow, step and outcome (ok, failed).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}, []string{"workflow", "step", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_workflow_step_retries_total",
			Help: "Failed runs of a step that this instance set to run again, by workflow and step."}, []string{"workflow", "step"}),
		instance: prometheus.NewDesc("trellis_workflow_instances",
			"Workflow instances of the shards this instance serves, by workflow and status (running, paused).",
			[]string{"workflow", "status"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.started.Describe(ch)
	m.ended.Describe(ch)
	m.steps.Describe(ch)
	m.retries.Describe(ch)
	ch <- m.instance
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.started.Collect(ch)
	m.ended.Collect(ch)
	m.steps.Collect(ch)
	m.retries.Collect(ch)
	if m.rs == nil {
		return
	}
	m.rs.mu.Lock()
	running := m.rs.running
	m.rs.mu.Unlock()
	for _, r := range running {
		c, ok := r.(counted)
		if !ok {
			continue
		}
		run, paused := c.counts()
		ch <- prometheus.MustNewConstMetric(m.instance, prometheus.GaugeValue, float64(run), r.ComponentID(), string(StatusRunning))
		ch <- prometheus.MustNewConstMetric(m.instance, prometheus.GaugeValue, float64(paused), r.ComponentID(), string(StatusPaused))
	}
}

// stepSeries keeps a workflow type's series of each step (its run's
// duration by outcome, its retries), each made on its first use, so that
// a run counts without the vectors' lookup by labels.
type stepSeries struct {
	mu     sync.Mutex
	byStep map[stepSeriesKey]prometheus.Observer // a Counter's Inc is its Add(1)
}

type stepSeriesKey struct {
	step   string
	series seriesOf
}

// seriesOf names one of a step's series.
type seriesOf uint8

const (
	stepOK      seriesOf = iota // trellis_workflow_step_seconds, outcome ok
	stepFailed                  // trellis_workflow_step_seconds, outcome failed
	stepRetries                 // trellis_workflow_step_retries_total
)

// of is step's series of workflow in m.
func (b *stepSeries) of(m *metrics, workflow, step string, series seriesOf) prometheus.Observer {
	k := stepSeriesKey{step, series}
	b.mu.Lock()
	defer b.mu.Unlock()
	if o := b.byStep[k]; o != nil {
		return o
	}
	if b.byStep == nil {
		b.byStep = make(map[stepSeriesKey]prometheus.Observer)
	}
	var o prometheus.Observer
	switch series {
	case stepOK:
		o = m.steps.WithLabelValues(workflow, step, "ok")
	case stepFailed:
		o = m.steps.WithLabelValues(workflow, step, "failed")
	default:
		o = prometheus.ObserverFunc(m.retries.WithLabelValues(workflow, step).Add)
	}
	b.byStep[k] = o
	return o
}

// counted is a runner that counts its shards' running and paused
// instances.
type counted interface{ counts() (running, paused int) }

// statuses are the last known statuses of the running and paused
// instances of the shards a runner serves: the gauges' counts.
type statuses struct {
	mu sync.Mutex
	by map[string]Status
}

// set notes id's status (forgotten when it is neither running nor paused).
func (s *statuses) set(id string, st Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != StatusRunning && st != StatusPaused {
		delete(s.by, id)
		return
	}
	if s.by == nil {
		s.by = make(map[string]Status)
	}
	s.by[id] = st
}

// drop forgets the instances for which gone is true (a shard handed over).
func (s *statuses) drop(gone func(id string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.by {
		if gone(id) {
			delete(s.by, id)
		}
	}
}

func (s *statuses) counts() (running, paused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.by {
		if st == StatusRunning {
			running++
		} else {
			paused++
		}
	}
	return running, paused
}

// observe counts what a write of a record changed: a start, an end.
func (r *Running[S]) observe(id string, before, after record, deleted bool) {
	m := r.metrics
	if before.Status == StatusNotStarted && (after.Status != StatusNotStarted || deleted) {
		m.started.WithLabelValues(r.t.id).Inc()
	}
	switch {
	case before.Status.over():
	case deleted:
		m.ended.WithLabelValues(r.t.id, "deleted").Inc()
	case after.Status == StatusFailed:
		m.ended.WithLabelValues(r.t.id, "failed").Inc()
	case after.Status == StatusEnded && after.Error == cancelled:
		m.ended.WithLabelValues(r.t.id, "cancelled").Inc()
	case after.Status == StatusEnded:
		m.ended.WithLabelValues(r.t.id, "ended").Inc()
	}
	status := after.Status
	if deleted {
		status = StatusEnded
	}
	r.statuses.set(id, status)
}
