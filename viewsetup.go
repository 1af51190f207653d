package trellis

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/views"
)

// openViews makes h's view runner over the store's change log, keeping
// the views in the same store: the embedded store's memory, or Redis in
// the cluster mode; the per-instance Redis store keeps no change log, and
// View.Start then fails.
//
// Each view projects the shards this instance serves, and stops
// projecting a shard before the cluster hands it over (with the
// consumers: see joinCluster).
func openViews(a *assembly) error {
	h := a.host
	cfg := views.Config{Logger: h.Logger, Store: views.NewMemoryStore(), Shards: a.shards}
	cfg.Log, cfg.NoLog = changeLog(h, "views")
	if h.Redis != nil {
		cfg.Store = views.NewRedisStore(h.Redis, h.Config.RedisPrefix)
	}
	r, err := views.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("trellis: views: %w", err)
	}
	h.views = r
	a.collectors = append(a.collectors, r.Collector())
	a.add(part{name: "the views' projectors",
		start: func(ctx context.Context) error { r.Start(ctx); return nil },
		stop:  r.Stop})
	return nil
}

// Views is what views start on (views.View.Start) and what their queries
// read through: the service's runner. A view is projected once setup has
// returned, each shard on the instance that serves it (every shard,
// without a cluster); its queries answer on every instance. With Redis
// and the cluster mode off, View.Start fails: the per-instance store
// keeps no change log.
func (h *Host) Views() *views.Runner { return h.views }
