package assembly

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/internal/cluster/node"
)

// joinCluster starts the transport and joins the cluster of the
// instances that share the host's Redis and prefix, when the instance is
// part of one (else the cluster is no part of the list, and the service
// serves every shard: node.Every). When Redis does not answer, the node
// joins once it does; any other failure (the port taken, say) is an
// error. The node's shards are taken once every part before it has
// started, and handed over when the service stops.
func joinCluster(a *assembly) error {
	if a.view == nil {
		return nil
	}
	h, cfg, cc := a.host, a.cfg, a.cfg.Cluster
	n, err := node.Join(node.Config{Redis: h.Redis, Prefix: cfg.RedisPrefix, Lease: cc.Lease,
		Secret: []byte(cc.Secret), Listen: cc.Listen, ListenSetting: cfg.ClusterSetting,
		Advertise: cc.Advertise, TLS: cc.TLS, Shards: a.view,
		Registry: h.Client.Registry(), System: h.System, Tracer: h.Client.Tracer(), Faults: cfg.Faults,
		BeforeRelease: func(ctx context.Context, shard int) {
			h.Consumers.BeforeRelease(ctx, shard)
			h.Views.BeforeRelease(ctx, shard)
			h.Workflows.BeforeRelease(ctx, shard)
		},
		Logger: h.Logger, Secrets: []string{cfg.RedisURL, cfg.RedisClusterURL}})
	if err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	a.add(part{name: "the cluster", start: n.Start, stop: n.Shutdown, cut: n.Crash})
	h.Cluster, a.admin, h.Claims = a.view, n, n
	if holder, ok := n.Holder(); ok {
		h.Handovers = newHandovers(n, holder)
		if err := n.Handle(producerComponent, h.Handovers.serve); err != nil {
			return fmt.Errorf("trellis: %w", err)
		}
	}
	a.collectors = append(a.collectors, n.Collectors()...)
	// Unready until a member: the first of the checks, before the
	// application's own.
	if err := h.Checks.Add("the cluster membership", a.view.Ready); err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	return nil
}
