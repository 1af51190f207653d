package trellis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/clusterhost"
	"github.com/trellis-go/trellis/internal/store"
)

// A membership is lost when Redis is out of reach (or frozen) for longer
// than the lease: the member's key expires, the others take its shards,
// and its renewals find the key gone. The node then joins again, as a new
// incarnation under the same id and address, and takes its share of the
// shards anew; meanwhile it serves no shard and routes every command to
// the owners.

// watch joins while the node has no membership (Redis did not answer at
// start) and again each time the membership is lost, until stop.
func (n *clusterNode) watch() {
	for {
		m := n.cur.Load()
		if m == nil {
			if !n.rejoin(nil) {
				return
			}
			continue
		}
		select {
		case <-m.member.Lost():
			if !n.rejoin(m) {
				return
			}
		case <-n.stop:
			return
		}
	}
}

// rejoin replaces the lost membership old (nil: there was none yet): it
// stops old's rebalancer and tries to join until it succeeds (true) or
// the node stops (false), waiting a little longer after each failure, up
// to the lease.
func (n *clusterNode) rejoin(old *membership) bool {
	if old != nil {
		n.log.Warn("cluster: the membership was lost; joining again", "member", n.id)
		old.host.Rebalancer().Shutdown() // old still routes commands to the owners meanwhile
	}
	wait := rejoinFirstWait
	for {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ClusterLease)
		m, err := n.connect(ctx)
		cancel()
		if err == nil {
			select {
			case <-n.stop: // stopped meanwhile: do not stay a member
				ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
				_ = m.member.Leave(ctx)
				cancel()
				return false
			default:
			}
			m.host.Rebalancer().Start()
			n.cur.Store(m)
			if old != nil {
				close(old.replaced) // what waited on old routes by m now
			}
			return true
		}
		n.log.Warn("cluster: joining failed; trying again", "err", store.Redact(err, n.cfg.RedisURL, n.cfg.RedisClusterURL),
			"in", wait.String())
		select {
		case <-time.After(wait):
		case <-n.stop:
			return false
		}
		wait = min(2*wait, n.cfg.ClusterLease)
	}
}

// rejoinFirstWait is the wait after the first failed attempt to join.
const rejoinFirstWait = 100 * time.Millisecond

// The entities.Cluster of the node: each call goes to the membership of
// the moment.

// Without a membership (joining, or joining again) the instance serves
// no shard, admits nothing and routes nothing.

func (n *clusterNode) Fence(entityType, id string) (cluster.Fence, bool) {
	m := n.cur.Load()
	if m == nil {
		return cluster.Fence{}, false
	}
	return m.host.Fence(entityType, id)
}

// Route routes by the membership of the moment; a command that waited
// for its shard's owner while that membership was lost waits for the next
// one (bounded by ctx) and is routed by it.
func (n *clusterNode) Route(ctx context.Context, entityType, id string) (string, func(), error) {
	for {
		m := n.cur.Load()
		if m == nil {
			return "", nil, errNotJoined
		}
		addr, done, err := m.host.Route(ctx, entityType, id)
		if !errors.Is(err, clusterhost.ErrLost) {
			return addr, done, err
		}
		select {
		case <-m.replaced:
		case <-n.stop:
			return "", nil, errNotJoined
		case <-ctx.Done():
			return "", nil, fmt.Errorf("wait for the cluster to be joined again: %w", ctx.Err())
		}
	}
}

func (n *clusterNode) Admit(ctx context.Context, entityType, id string) (func(), error) {
	m := n.cur.Load()
	if m == nil {
		return nil, fmt.Errorf("%w (it is joining the cluster)", entities.ErrMoved)
	}
	return m.host.Admit(ctx, entityType, id)
}

func (n *clusterNode) Forward(ctx context.Context, addr string, call components.DeferredCall) (json.RawMessage, error) {
	m := n.cur.Load()
	if m == nil {
		return nil, errNotJoined
	}
	return m.host.Forward(ctx, addr, call)
}

// errNotJoined answers a command while the instance has no membership.
var errNotJoined = fmt.Errorf("%w: this instance is joining the cluster (its Redis did not answer)", components.ErrUnavailable)

// ready is the cluster's part of /readyz: a member, or why not.
func (n *clusterNode) ready(context.Context) error {
	if n.cur.Load() == nil {
		return errNotJoined
	}
	return nil
}
