package node

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/peer"
)

// metrics are the series of this instance's traffic in the cluster:
// the commands it forwarded to another instance (by outcome, and their
// round trips), those it ran as the owner for another, and the shards it
// acquired and released. They count from the node's start and survive its
// joins again. Labels are component ids and fixed sets, never entity ids
// or addresses.
type metrics struct {
	forwards *prometheus.CounterVec   // component, outcome
	duration *prometheus.HistogramVec // component
	served   *prometheus.CounterVec   // component
	moves    *prometheus.CounterVec   // direction
}

// The outcomes of a forward, as trellis_cluster_forwards_total's outcome.
const (
	outcomeOK          = "ok"          // the owner ran it and answered
	outcomeRefused     = "refused"     // the owner answered an error of its own (a refusal, conflict, not found, ...)
	outcomeMoved       = "moved"       // the owner did not own the shard (any more): routed again
	outcomeUnavailable = "unavailable" // surely not run: the owner (or its store) could not be reached
	outcomeUnknown     = "unknown"     // sent, and no answer came back: it may have run
	outcomeDeadline    = "deadline"    // the caller's deadline passed (once sent, it may have run)
	outcomeCanceled    = "canceled"    // the caller gave up (likewise)
)

// forwardBuckets span a forward's round trip from a loopback call
// (~50 µs) to the transport's longest waits (seconds).
var forwardBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

func newMetrics() *metrics {
	return &metrics{
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trellis_cluster_forwards_total",
			Help: "Commands this instance forwarded to the owner of their shard, by component id and outcome: " +
				"ok, refused (the owner's own error answer), moved, unavailable (surely not run), unknown (may have run), " +
				"deadline, canceled.",
		}, []string{"component", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "trellis_cluster_forward_duration_seconds",
			Help:    "Round trip of the commands this instance forwarded, as it saw it, by component id (every outcome).",
			Buckets: forwardBuckets,
		}, []string{"component"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trellis_cluster_forwards_served_total",
			Help: "Commands another instance forwarded that this one handled as the owner, by component id " +
				"(those it answered \"moved\" left out).",
		}, []string{"component"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trellis_cluster_shard_moves_total",
			Help: "Shards this instance acquired (direction=\"acquired\") and released (direction=\"released\").",
		}, []string{"direction"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.forwards, m.duration, m.served, m.moves}
}

// forwarded counts a forward of component's that took took and ended in
// err (nil, a *peer.Error, or the error the caller gets from it).
func (m *metrics) forwarded(component string, took time.Duration, err error) {
	m.forwards.WithLabelValues(component, forwardOutcome(err)).Inc()
	m.duration.WithLabelValues(component).Observe(took.Seconds())
}

// servedCall counts a forwarded call of component's handled here, unless
// it was answered "moved" (not run here: its sender routes it again).
func (m *metrics) servedCall(component string, err error) {
	if !errors.Is(err, peer.ErrMoved) && !errors.Is(err, entities.ErrMoved) {
		m.served.WithLabelValues(component).Inc()
	}
}

// moved counts a shard acquired or released (cluster.Hooks.OnMoved).
func (m *metrics) moved(_ int, acquired bool) {
	direction := "released"
	if acquired {
		direction = "acquired"
	}
	m.moves.WithLabelValues(direction).Inc()
}

// forwardOutcome is the outcome label of a forward's error: a *peer.Error
// as the transport answered it, or the error the caller gets from it
// (whose sentinels are the components' and the entities' ones). The
// caller's deadline or cancellation is named as such, whether or not the
// call had been sent (if it had, it may have run).
func forwardOutcome(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, peer.ErrMoved), errors.Is(err, entities.ErrMoved):
		return outcomeMoved
	case errors.Is(err, context.DeadlineExceeded):
		return outcomeDeadline
	case errors.Is(err, context.Canceled):
		return outcomeCanceled
	case errors.Is(err, peer.ErrOutcomeUnknown), errors.Is(err, components.ErrOutcomeUnknown):
		return outcomeUnknown
	case errors.Is(err, peer.ErrUnavailable), errors.Is(err, components.ErrUnavailable):
		return outcomeUnavailable
	}
	return outcomeRefused
}
