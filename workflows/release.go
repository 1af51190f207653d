package workflows

import (
	"context"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
)

// releaseTimeout bounds the wait for a shard's steps in flight before it
// is handed over.
const releaseTimeout = 10 * time.Second

// BeforeRelease stops the steps of shard's instances before the shard is
// handed over: their runs are cancelled (not committed: the next owner
// runs them again, under the same key) and waited for, bounded by ctx and
// releaseTimeout, so that a step does not run on this instance while the
// next owner runs it; until the shard is served again under a new fence,
// no step of it starts here. A step's handler that ignores its context's
// cancellation is waited for only that long.
func (r *Running[S]) BeforeRelease(ctx context.Context, shard int) {
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	f, serving := r.serving(shard)
	r.mu.Lock()
	if serving {
		r.releasing[shard] = f
	}
	var ds []*drive
	for id, d := range r.active {
		if cluster.ShardOf(r.t.id, id) == shard {
			d.cancel()
			ds = append(ds, d)
		}
	}
	r.mu.Unlock()
	for _, d := range ds {
		select {
		case <-d.done:
		case <-ctx.Done():
			r.log.Warn("workflows: a step of a shard handed over did not stop in time", "shard", shard, "err", ctx.Err().Error())
			return
		}
	}
}

// releasingLocked reports whether this instance does not serve id's shard
// or is handing it over (under the fence it serves it with now). r.mu is
// held.
func (r *Running[S]) releasingLocked(id string) bool {
	f, ok := r.fenceOf(id)
	if !ok {
		return true
	}
	rf, releasing := r.releasing[cluster.ShardOf(r.t.id, id)]
	return releasing && rf == f
}

// watchLapses stops the drives of the shards this instance has stopped
// serving (stopLapsed) every shardsEvery, until ctx ends. It is a loop
// of its own: watchShards waits for the store, which an instance cut off
// from it does not reach.
func (r *Running[S]) watchLapses(ctx context.Context) {
	defer r.loops.Done()
	tick := time.NewTicker(shardsEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.stopLapsed()
		}
	}
}

// stopLapsed cancels the drives whose shard this instance no longer
// serves under the fence it served it under when they started: its lease
// lapsed (it is cut off from Redis), or the shard was taken or served
// anew. Their steps must not run on, nor their outcomes be committed,
// while another owner may run them: the instance's lease lapses here
// before it does in Redis (cluster.Lease), and only then can another
// instance take the shard, so a step that heeds its context's
// cancellation stops first. Such a shard's instances are resumed when it
// is served here again (watchShards, told by lapsed even when it did not
// see the shard unserved).
func (r *Running[S]) stopLapsed() {
	type serving struct {
		known, ok bool
		fence     cluster.Fence
	}
	var shards [cluster.NumShards]serving
	stopped := 0
	r.mu.Lock()
	for id, d := range r.active {
		shard := cluster.ShardOf(r.t.id, id)
		s := &shards[shard]
		if !s.known {
			s.fence, s.ok = r.fenceOf(id)
			s.known = true
		}
		if (!s.ok || s.fence != d.fence) && d.ctx.Err() == nil {
			d.cancel()
			r.lapsed[shard] = true
			stopped++
		}
	}
	r.mu.Unlock()
	if stopped > 0 {
		r.log.Warn("workflows: steps stopped: this instance no longer serves their shards under the fence they started with (its lease lapsed, or the shards moved); their next owners run them again",
			"steps", stopped)
	}
}

// takeLapsed returns the shards whose drives stopLapsed stopped since
// the last call, and forgets them.
func (r *Running[S]) takeLapsed() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lapsed) == 0 {
		return nil
	}
	shards := make([]int, 0, len(r.lapsed))
	for shard := range r.lapsed {
		shards = append(shards, shard)
		delete(r.lapsed, shard)
	}
	return shards
}

// BeforeRelease stops the steps of shard on every runner (see
// Running.BeforeRelease); the service calls it in the shard's release,
// before the shard's entity commands drain.
func (rs *Runners) BeforeRelease(ctx context.Context, shard int) {
	rs.mu.Lock()
	running := rs.running
	rs.mu.Unlock()
	for _, r := range running {
		if rel, ok := r.(interface {
			BeforeRelease(ctx context.Context, shard int)
		}); ok {
			rel.BeforeRelease(ctx, shard)
		}
	}
}
