package cluster

import (
	"context"
	"time"
)

// A member announces each change the others must act on, so that their
// rebalancers pass at once rather than at their next tick (Lease/3): its
// join (the others give it shards), its drain and its leave (the others
// take its shards), each shard it releases (its preferred owner takes
// it), and a pass of its that acquired shards (the others' tables follow).
// An announcement is a PUBLISH of the member's incarnation on one channel
// per service; on a Redis Cluster a PUBLISH reaches the subscribers of
// every node. One that is lost (a subscriber reconnecting) costs only
// that wait: the tick still passes.

// announceTimeout bounds an announcement: a held connection must not
// hold up the rebalancer's next move.
const announceTimeout = time.Second

// moves is the announcement channel: <p>:cluster:{members}:moves.
func (k keys) moves() string { return k.space.Tagged(area, membersTag, "moves") }

// announce publishes a change of this member's. A failure is not
// reported: the others find the change at their next tick.
func (m *Member) announce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	_ = m.cfg.Client.Publish(ctx, m.keys.moves(), m.inc).Err()
}

// listen subscribes to the other members' announcements, each a Trigger,
// until the returned stop is called. It does not wait for Redis: once
// Redis confirms the subscription it triggers a pass, which sees what
// was announced before. go-redis subscribes again by itself after a lost
// connection (what was announced meanwhile waits for a tick).
func (r *Rebalancer) listen() (stop func()) {
	ps := r.m.cfg.Client.Subscribe(r.ctx, r.m.keys.moves())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := ps.Receive(r.ctx); err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.log.Warn("cluster: the subscription to the members' announcements failed; retrying",
				"err", err.Error())
		}
		r.Trigger()
		for msg := range ps.Channel() {
			if msg.Payload != r.m.inc {
				r.Trigger()
			}
		}
	}()
	return func() {
		_ = ps.Close()
		<-done
	}
}
