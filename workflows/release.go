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
