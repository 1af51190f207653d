package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/store"
)

// Start lets the rebalancer take shards (once every other part has
// started: every entity type and consumer), and watches the membership:
// when it is lost, the node joins again.
func (n *Node) Start(context.Context) error {
	if m := n.view.cur.Load(); m != nil {
		m.host.Rebalancer().Start()
	}
	n.watching.Go(n.watch)
	return nil
}

// Shutdown hands the shards over (leave), then stops the transport
// (close). A Redis out of reach cannot take the shards back: the others
// take them when this member's lease lapses, as after a crash.
func (n *Node) Shutdown(ctx context.Context) error {
	var errs []error
	switch err := n.leave(ctx); {
	case store.Unavailable(err):
		n.log.Warn("shutting down: could not hand the shards over, Redis does not answer: the other instances serve them once this one's lease lapses",
			"err", store.Redact(err, n.cfg.Secrets...))
	case err != nil:
		errs = append(errs, err)
	}
	if err := n.close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop the cluster transport: %w", err))
	}
	return errors.Join(errs...)
}

// leave hands every shard this instance owns over to the others, one at
// a time, each after its commands in flight have finished, and ends the
// membership. The transport still answers meanwhile: a command forwarded
// here for a shard being handed over waits for the new owner.
func (n *Node) leave(ctx context.Context) error {
	n.stopJoining()
	m := n.view.cur.Load()
	if m == nil {
		return nil
	}
	n.log.Info("leaving the cluster: handing the shards over")
	err := m.host.Rebalancer().Leave(ctx)
	if errors.Is(err, cluster.ErrGone) {
		n.log.Warn("leaving the cluster: the membership had lapsed already; the others serve its shards", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("leave the cluster: %w", err)
	}
	return nil
}

// stopJoining stops the watcher, and waits for a join it may be making.
func (n *Node) stopJoining() {
	n.stopOnce.Do(func() { close(n.view.stop) })
	n.watching.Wait()
}

// close stops the transport once nothing is forwarded here any more:
// commands in flight finish (bounded by ctx).
func (n *Node) close(ctx context.Context) error {
	if n.server == nil { // never listened: Redis never answered
		return nil
	}
	return errors.Join(n.dir.Close(ctx), n.server.Shutdown(ctx), n.peers.Close())
}

// abort undoes a join that failed half way.
func (n *Node) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	n.stopJoining()
	if m := n.view.cur.Load(); m != nil {
		m.host.Rebalancer().Shutdown()
		_ = m.member.Leave(ctx)
	}
	_ = n.close(ctx)
}

// abortTimeout bounds the undoing of a join that failed half way.
const abortTimeout = 10 * time.Second

// Crash ends the node's part in the cluster without a word to Redis or
// to the other instances: no more renewals, moves or joins, the shards
// still recorded as owned, the transport's connections closed at once.
func (n *Node) Crash() {
	n.stopJoining()
	if m := n.view.cur.Load(); m != nil {
		m.host.Rebalancer().Shutdown()
		m.member.Abandon()
	}
	if n.server == nil { // never listened: Redis never answered
		return
	}
	n.dir.Abandon() // its registrations lapse with the lease
	now, cancel := context.WithCancel(context.Background())
	cancel() // a done context: the server closes its connections at once
	_ = n.server.Shutdown(now)
	_ = n.peers.Close()
}
