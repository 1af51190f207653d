package trellis

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/redisqueue"
)

// readinessMetricTimeout bounds a readiness check run for /metrics.
const readinessMetricTimeout = 2 * time.Second

// AddReadinessCheck adds an application's own readiness check: GET
// /readyz answers 503, with the reason "<name> is not ready" (the error
// goes to the log), while check returns an error. The checks run after
// the store's and the timer scheduler's, in the order added, within the
// probe's 2 s; keep them cheap (a producer handle's Err, say). Each is
// also the gauge trellis_readiness_check{check="<name>"} in /metrics: 1
// while it passes, 0 while it fails. Call it during setup; a name must be
// non-empty and not yet used.
func (h *Host) AddReadinessCheck(name string, check func(context.Context) error) error {
	if err := h.checks.Add(name, check); err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "trellis_readiness_check",
		Help:        "An application's readiness check: 1 while it passes, 0 while it fails (see /readyz).",
		ConstLabels: prometheus.Labels{"check": name},
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), readinessMetricTimeout)
		defer cancel()
		if check(ctx) != nil {
			return 0
		}
		return 1
	})
	if err := h.Metrics.Register(gauge); err != nil {
		return fmt.Errorf("trellis: readiness check %q: metric: %w", name, err)
	}
	return nil
}

// DurableQueue returns the durable producer queue of producerID for a
// producer controller of the service (delivery.WithDurableQueue): in the
// service's Redis, under its key prefix (redisqueue.ForService), owned by
// one producer controller at a time across the service's instances; with
// the embedded store, in memory (durable.NewMemory: it does not outlive
// the process). codec encodes whole messages (nil: JSON).
func DurableQueue[A any](h *Host, producerID string, codec durable.Codec[A]) (durable.Queue[A], error) {
	if h.Redis == nil {
		return durable.NewMemory[A](), nil
	}
	q, err := redisqueue.ForService(h.Redis, h.Config.RedisPrefix, producerID, codec)
	if err != nil {
		return nil, fmt.Errorf("trellis: durable queue of producer %q: %w", producerID, err)
	}
	return q, nil
}
