package assembly

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/views"
)

// openViews makes the host's view runner over the store's change log,
// keeping the views in the same store: the embedded store's memory, or
// Redis in the cluster mode; the per-instance Redis store keeps no change
// log, and View.Start then fails.
//
// Each view projects the shards this instance serves, and stops
// projecting a shard before the cluster hands it over (with the
// consumers: see joinCluster).
func openViews(a *assembly) error {
	h := a.host
	cfg := views.Config{Logger: h.Logger, Store: views.NewMemoryStore(), Shards: h.Shards}
	cfg.Log, cfg.NoLog = changeLog(a, "views")
	if h.Redis != nil {
		cfg.Store = views.NewRedisStore(h.Redis, a.cfg.RedisPrefix)
	}
	r, err := views.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("trellis: views: %w", err)
	}
	h.Views = r
	a.collectors = append(a.collectors, r.Collector())
	a.add(part{name: "the views' projectors",
		start: func(ctx context.Context) error { r.Start(ctx); return nil },
		stop:  r.Stop})
	return nil
}
