package assembly

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/consumers"
)

// openConsumers makes the host's consumer runner over the store's change
// log: the embedded store's, or the sharded store's in the cluster mode;
// the per-instance Redis store keeps none, and Consumer.Start then fails.
// Each consumes the shards this instance serves. They stop before the
// cluster hands the shards over: each finishes the handler in flight and
// saves its checkpoint, and the changes not handled yet are handled by
// the shards' next owners.
func openConsumers(a *assembly) error {
	h := a.host
	cfg := consumers.Config{Client: h.Client, Timers: h.Timers, Clock: h.Clock, Logger: h.Logger,
		DeadLetters: consumers.NewMemoryDeadLetters(), Shards: h.Shards}
	cfg.Log, cfg.NoLog = changeLog(a, "consumers")
	if h.Redis != nil {
		cfg.DeadLetters = consumers.NewRedisDeadLetters(h.Redis, a.cfg.RedisPrefix)
	}
	r, err := consumers.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("trellis: consumers: %w", err)
	}
	h.Consumers = r
	a.collectors = append(a.collectors, r.Collector())
	a.add(part{name: "the consumers",
		start: func(ctx context.Context) error { r.Start(ctx); return nil },
		stop:  r.Stop})
	return nil
}
