package views

import (
	"context"
	"sync"
	"time"
)

// A view's shards are built one by one as their projectors first open
// them (a new view, or a new generation of one). Until a shard is built,
// a query sees the rows its build has written so far; once it is, it
// stays built (a build anew, behind the change log's bound, keeps the
// shard's position until it ends).

// Waits of a stream for the shards being built.
const (
	// buildWait is how long a stream about to send its rows waits for the
	// shards still being built: rows read before a shard's build ended
	// would be followed by a reset when it does. Past it, the rows are
	// sent as they are.
	buildWait = 5 * time.Second
	// buildPoll is how often the wait reads how many shards are built.
	buildPoll = 20 * time.Millisecond
)

// builtGens are the generations this instance saw built on every shard.
type builtGens struct {
	mu   sync.Mutex
	seen map[string]bool
}

// Built reports whether view's own generation is built on every shard.
// Until then a shard not yet built answers with the rows its build has
// written so far; a stream waits for the builds, up to 5 s, before it
// sends its rows.
func (r *Runner) Built(ctx context.Context, view string) (bool, error) {
	d, err := r.view(view)
	if err != nil {
		return false, err
	}
	return r.builtEverywhere(ctx, d.gen)
}

// builtEverywhere reports whether generation gen is built on every
// shard: a read of the store until it is, then this instance's memory.
func (r *Runner) builtEverywhere(ctx context.Context, gen string) (bool, error) {
	r.built.mu.Lock()
	seen := r.built.seen[gen]
	r.built.mu.Unlock()
	if seen {
		return true, nil
	}
	n, err := r.cfg.Store.builtShards(ctx, gen)
	if err != nil || n < numShards {
		return false, err
	}
	r.built.mu.Lock()
	defer r.built.mu.Unlock()
	if r.built.seen == nil {
		r.built.seen = make(map[string]bool)
	}
	r.built.seen[gen] = true
	return true, nil
}

// awaitBuilt waits until the generation followed is built on every shard,
// for up to buildWait; it returns ctx's error if ctx ends first, or the
// store's.
func (f *Follower) awaitBuilt(ctx context.Context) error {
	deadline := time.Now().Add(buildWait)
	for {
		built, err := f.r.builtEverywhere(ctx, f.d.gen)
		if err != nil || built || !time.Now().Before(deadline) {
			return err
		}
		if !f.pause(ctx, buildPoll, nil) {
			return ctx.Err()
		}
	}
}
