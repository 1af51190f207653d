package assembly

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// readinessMetricTimeout bounds a readiness check run for /metrics.
const readinessMetricTimeout = 2 * time.Second

// AddReadinessCheck adds an application's own readiness check to Checks,
// and its gauge trellis_readiness_check{check="<name>"} to Metrics: 1
// while it passes, 0 while it fails (trellis.Host.AddReadinessCheck says
// what an application gets).
func (h *Host) AddReadinessCheck(name string, check func(context.Context) error) error {
	if err := h.Checks.Add(name, check); err != nil {
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
