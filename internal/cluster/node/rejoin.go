package node

import (
	"context"
	"time"

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
func (n *Node) watch() {
	for {
		m := n.view.cur.Load()
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
		case <-n.view.stop:
			return
		}
	}
}

// rejoin replaces the lost membership old (nil: there was none yet): it
// stops old's rebalancer and tries to join until it succeeds (true) or
// the node stops (false), waiting a little longer after each failure, up
// to the lease.
func (n *Node) rejoin(old *membership) bool {
	if old != nil {
		n.log.Warn("cluster: the membership was lost; joining again", "member", n.id)
		old.host.Rebalancer().Shutdown() // old still routes commands to the owners meanwhile
	}
	wait := rejoinFirstWait
	for {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Lease)
		m, err := n.connect(ctx)
		cancel()
		if err == nil {
			select {
			case <-n.view.stop: // stopped meanwhile: do not stay a member
				ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
				_ = m.member.Leave(ctx)
				cancel()
				return false
			default:
			}
			m.host.Rebalancer().Start()
			n.view.cur.Store(m)
			if old != nil {
				close(old.replaced) // what waited on old routes by m now
			}
			return true
		}
		n.log.Warn("cluster: joining failed; trying again", "err", store.Redact(err, n.cfg.Secrets...),
			"in", wait.String())
		select {
		case <-time.After(wait):
		case <-n.view.stop:
			return false
		}
		wait = min(2*wait, n.cfg.Lease)
	}
}

// rejoinFirstWait is the wait after the first failed attempt to join.
const rejoinFirstWait = 100 * time.Millisecond
