package trellis

import (
	"fmt"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/views"
)

// openViews makes h's view runner over the store's change log, keeping
// the views in the same store: the embedded store's memory, or Redis in
// the cluster mode; the per-instance Redis store keeps no change log, and
// View.Start then fails.
func openViews(h *Host, node *clusterNode) error {
	cfg := views.Config{Logger: h.Logger, Store: views.NewMemoryStore()}
	if log, ok := h.Store.(entities.ChangeLog); ok {
		cfg.Log = log
	} else {
		cfg.NoLog = "views need the cluster mode on Redis (set " + EnvClusterAddr + "), or the embedded store: " +
			"a Redis store without it keeps no change log"
	}
	if h.Redis != nil {
		cfg.Store = views.NewRedisStore(h.Redis, h.Config.RedisPrefix)
	}
	if node != nil {
		cfg.Shards = node
		node.views = func() *views.Runner { return h.views }
	}
	r, err := views.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("trellis: views: %w", err)
	}
	h.views = r
	return nil
}

// Views is what views start on (views.View.Start) and what their queries
// read through: the service's runner. A view is projected once setup has
// returned, each shard on the instance that serves it (every shard,
// without a cluster); its queries answer on every instance. With Redis
// and the cluster mode off, View.Start fails: the per-instance store
// keeps no change log.
func (h *Host) Views() *views.Runner { return h.views }
