package workflows

import "context"

// A runner's life and its crash. A test kit's crash points
// (faulthook.WorkflowCrashes, handed to the service's Runners) may make a
// runner crash at one of them: it then does what a kill -9 of its
// instance does to it — its steps in flight are cancelled and their
// outcomes dropped, nothing more is written, what it held in memory is
// forgotten — and resumes as the shards' next owner would, from the
// records in the store. The entities it called are not touched: their
// writes are in the store already, as they would be after a real crash.

// The crash points of a run (faulthook.WorkflowPoint.Where).
const (
	// pointBeforeStep: the transition into the step is committed, the
	// step has not run (after the commit, before the next step starts).
	pointBeforeStep = "before step"
	// pointAfterStep: the step's handler returned, its calls were made,
	// its outcome is not committed.
	pointAfterStep = "after step"
	// pointBeforeTimer: the pause is committed, its timer not armed.
	pointBeforeTimer = "before the timer"
)

// life is a runner's life: its drives and its shard watches run in ctx,
// which a crash or Stop cancels; loop is closed once watchShards ended.
type life struct {
	ctx    context.Context
	cancel context.CancelFunc
	loop   chan struct{}
}

// live starts a life of the runner: a shard watch that resumes the
// workflows of every shard this instance serves, and one that stops the
// drives of the shards it stops serving. r.mu is held.
func (r *Running[S]) live() {
	ctx, cancel := context.WithCancel(r.ctx)
	r.life = life{ctx: ctx, cancel: cancel, loop: make(chan struct{})}
	r.loops.Add(2)
	go r.watchShards(ctx, r.life.loop)
	go r.watchLapses(ctx)
}

// crashAt passes crash point where of id's run at; true: the runner
// crashes there, and the caller must return at once.
func (r *Running[S]) crashAt(where, id string, at attempt) bool {
	if r.hooks.crashes == nil {
		return false
	}
	if !r.hooks.crashes.CrashWorkflow(r.point(where, id, at)) {
		return false
	}
	r.crash()
	return true
}

// crash ends the runner's life, and starts another once every drive of
// the last has returned.
func (r *Running[S]) crash() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.crashed {
		return
	}
	r.crashed = true
	last := r.life
	last.cancel()
	r.loops.Add(1)
	go r.resumeAfter(last)
}

// resumeAfter waits for the life that crashed to end, then starts the
// next, which resumes from the store, and wakes the instances woken
// meanwhile.
func (r *Running[S]) resumeAfter(last life) {
	defer r.loops.Done()
	<-last.loop
	r.drives.Wait() // no drive starts while crashed
	r.mu.Lock()
	r.crashed = false
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.live()
	r.mu.Unlock()
	r.wakeMissed()
}

// wakeMissed wakes the instances woken while the runner did not live.
func (r *Running[S]) wakeMissed() {
	r.mu.Lock()
	missed := r.missed
	r.missed = make(map[string]bool)
	r.mu.Unlock()
	for id := range missed {
		r.poke(id)
	}
}
