package trellis

import (
	"context"
	"encoding/json"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/cluster"
)

// A membership is lost when Redis is out of reach (or frozen) for longer
// than the lease: the member's key expires, the others take its shards,
// and its renewals find the key gone. The node then joins again, as a new
// incarnation under the same id and address, and takes its share of the
// shards anew; meanwhile it serves no shard and routes every command to
// the owners.

// watch joins again each time the membership is lost, until stop.
func (n *clusterNode) watch() {
	for {
		m := n.cur.Load()
		select {
		case <-m.member.Lost():
			n.rejoin(m)
		case <-n.stop:
			return
		}
	}
}

// rejoin replaces the lost membership old: it stops old's rebalancer and
// tries to join until it succeeds or the node stops, waiting a little
// longer after each failure, up to the lease.
func (n *clusterNode) rejoin(old *membership) {
	n.log.Warn("cluster: the membership was lost; joining again", "member", n.join.ID)
	old.host.Rebalancer().Shutdown()
	wait := rejoinFirstWait
	for {
		ctx, cancel := context.WithTimeout(context.Background(), n.join.Lease)
		m, err := n.joinOnce(ctx)
		cancel()
		if err == nil {
			select {
			case <-n.stop: // stopped meanwhile: do not stay a member
				ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
				_ = m.member.Leave(ctx)
				cancel()
				return
			default:
			}
			m.host.Rebalancer().Start()
			n.cur.Store(m)
			n.log.Info("cluster: joined again", "member", n.join.ID)
			return
		}
		n.log.Warn("cluster: joining again failed; trying again", "err", err, "in", wait.String())
		select {
		case <-time.After(wait):
		case <-n.stop:
			return
		}
		wait = min(2*wait, n.join.Lease)
	}
}

// rejoinFirstWait is the wait after the first failed attempt to join
// again.
const rejoinFirstWait = 100 * time.Millisecond

// The entities.Cluster of the node: each call goes to the membership of
// the moment.

func (n *clusterNode) Fence(entityType, id string) (cluster.Fence, bool) {
	return n.cur.Load().host.Fence(entityType, id)
}

func (n *clusterNode) Route(ctx context.Context, entityType, id string) (string, func(), error) {
	return n.cur.Load().host.Route(ctx, entityType, id)
}

func (n *clusterNode) Admit(ctx context.Context, entityType, id string) (func(), error) {
	return n.cur.Load().host.Admit(ctx, entityType, id)
}

func (n *clusterNode) Forward(ctx context.Context, addr string, call components.DeferredCall) (json.RawMessage, error) {
	return n.cur.Load().host.Forward(ctx, addr, call)
}
