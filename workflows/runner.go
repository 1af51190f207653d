package workflows

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/clocks"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/tracing"
)

// Timings of the runner.
const (
	// shardsEvery is how often the runner looks at which shards this
	// instance serves, to resume the workflows of those it has just taken.
	shardsEvery = 100 * time.Millisecond
	// retryAfterError is the wait after a read or a commit of a record
	// failed (the store out of reach, the shard moving).
	retryAfterError = time.Second
	// callTimeout bounds a read or a commit of a record (drive.callCtx):
	// one may wait to be admitted while no owner of its shard is known.
	callTimeout = 10 * time.Second
)

// drive is an instance a goroutine of the runner drives: again is set when
// it was woken while the goroutine ran, and kick cuts a retry's wait short
// (an operator's retry now).
type drive struct {
	again bool
	kick  chan struct{}
	// ctx is the drive's: cancelled by Stop, by the hand-over of the
	// instance's shard (BeforeRelease), which waits for done, and once
	// the shard is no longer served under fence, the one it was served
	// under when the drive started (stopLapsed).
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	fence  cluster.Fence

	// callMu guards the context of the drive's reads and commits (see
	// callCtx), which ends at callEnds.
	callMu     sync.Mutex
	call       context.Context
	callCancel context.CancelFunc
	callEnds   time.Time
}

// callCtx is the context of a read or a commit of d's record: a child of
// d's that ends between callTimeout/2 and callTimeout from now. The calls
// of half a callTimeout share it, so that a call does not pay for a timer
// of its own; the drive's end cancels it.
func (d *drive) callCtx() context.Context {
	d.callMu.Lock()
	defer d.callMu.Unlock()
	now := time.Now()
	if d.call == nil || d.callEnds.Sub(now) < callTimeout/2 {
		if d.callCancel != nil {
			d.callCancel() // its calls ended: a drive's calls are made one after the other
		}
		d.callEnds = now.Add(callTimeout)
		d.call, d.callCancel = context.WithDeadline(d.ctx, d.callEnds)
	}
	return d.call
}

// wake has the runner look at instance id, once the write that made rec
// is done (its read queues behind that write on the entity): run its
// step, or arm the timer that wakes its pause.
func (r *Running[S]) wake(id string, rec record) bool {
	if rec.Status == StatusRunning || !rec.wakeAt().IsZero() {
		return r.poke(id)
	}
	return true
}

// poke starts a goroutine that drives id, or tells the one that does to
// look again; false when it can do neither now (its shard is not served
// here, or is being handed over, or id's last drive is still stopping).
func (r *Running[S]) poke(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return true
	}
	d, driven := r.active[id]
	if driven && d.ctx.Err() == nil {
		d.again = true
		select {
		case d.kick <- struct{}{}:
		default:
		}
		return true
	}
	if r.releasingLocked(id) {
		return false // its shard's next owner resumes it
	}
	if r.crashed || r.life.ctx == nil {
		// Crashed, or started and not yet live (a command came before
		// Start returned): woken once the runner lives.
		r.missed[id] = true
		return true
	}
	if driven {
		// Its drive was cancelled (its shard was not served a while)
		// and has not returned: it would take no wake. The shard's
		// resume looks at id again at its next look (watchShards).
		return false
	}
	d = &drive{kick: make(chan struct{}, 1), done: make(chan struct{})}
	d.fence, _ = r.fenceOf(id)
	d.ctx, d.cancel = context.WithCancel(r.life.ctx)
	r.active[id] = d
	r.drives.Add(1)
	select {
	case r.idle <- driveJob{id: id, d: d}:
	default:
		r.drivers.Add(1)
		go r.driver(driveJob{id: id, d: d})
	}
	return true
}

// maxIdleDrivers bounds the goroutines that wait for a drive.
const maxIdleDrivers = 64

// driveJob is a drive for a driver to run.
type driveJob struct {
	id string
	d  *drive
}

// driver runs drives: j, then those it is handed while it waits (up to
// maxIdleDrivers wait at once; the rest leave), until the runner stops.
// A drive runs deep (a step's handler, its commit through the record's
// entity and the store's client): on a goroutine that ran one before,
// its stack has grown already, where a new goroutine's grows by copies.
func (r *Running[S]) driver(j driveJob) {
	defer r.drivers.Done()
	for {
		r.drive(j.id, j.d, nil)
		if r.idlers.Add(1) > maxIdleDrivers {
			r.idlers.Add(-1)
			return
		}
		select {
		case j = <-r.idle:
			r.idlers.Add(-1)
		case <-r.ctx.Done():
			r.idlers.Add(-1)
			return
		}
	}
}

// drive drives id until it neither runs here nor was woken again. from,
// when set, is a step run to commit first: one that ran past its timeout
// while its handler held the goroutine that drove id before (see
// stepLimit), which leaves the drive to this one.
func (r *Running[S]) drive(id string, d *drive, from *ranStep) {
	for {
		if !r.driveOnce(d, id, from) {
			return // handed over: another goroutine drives id now
		}
		from = nil
		if r.finished(id) {
			break
		}
	}
	d.cancel()
	close(d.done)
	r.drives.Done()
}

// finished ends id's drive, unless it was woken meanwhile.
func (r *Running[S]) finished(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.active[id]
	if d.again && !r.stopped && d.ctx.Err() == nil {
		d.again = false
		return false
	}
	delete(r.active, id)
	return true
}

// driveOnce runs id's steps one after the other while it is running and
// this instance serves its shard, then arms the timer of its pause; from
// is a step run to commit first (nil: none). It returns false when a step
// ran past its timeout and the drive was handed over to another goroutine.
func (r *Running[S]) driveOnce(d *drive, id string, from *ranStep) bool {
	ctx := d.ctx
	var rec record
	var err error
	var settled *attempt // the run last committed, until a test kit's stepping is told (stepSettled)
	if from != nil {
		var stop bool
		if rec, stop, err = r.commit(d, id, *from); stop {
			return true
		}
		if err == nil {
			settled = &from.at
		}
	} else {
		rec, err = r.read(d, id)
	}
	for ctx.Err() == nil {
		if err != nil {
			if !r.serves(id) {
				return true // its shard's next owner resumes it
			}
			r.log.Warn("workflows: a record could not be read or written; trying again", "id", id, "err", err.Error())
			if r.wait(ctx, retryAfterError, nil) != waited {
				return true
			}
			rec, err = r.read(d, id)
			continue
		}
		if !r.serves(id) {
			return true // its shard's next owner resumes it
		}
		if rec.Status != StatusRunning {
			if !rec.wakeAt().IsZero() {
				if r.crashAt(pointBeforeTimer, id, rec.attempt()) {
					return true
				}
				if err = r.arm(id, rec); err != nil {
					continue
				}
			}
			r.stepSettled(id, settled)
			return true
		}
		r.stepSettled(id, settled)
		settled = nil
		switch r.waitToRun(ctx, id, rec, d.kick) {
		case stopped:
			return true
		case kicked: // the record changed: read it again
			rec, err = r.read(d, id)
			continue
		}
		if r.crashAt(pointBeforeStep, id, rec.attempt()) {
			return true
		}
		ran, ok := r.run(d, id, rec)
		if !ok {
			return false
		}
		var stop bool
		if rec, stop, err = r.commit(d, id, ran); stop {
			return true
		}
		if err == nil {
			settled = &ran.at
		}
	}
	return true
}

// waitToRun waits until rec's step may run: its retry is due, and a test
// kit's stepping, if any, lets it start; or until ctx ends (stopped), or
// kick fires (kicked: the record changed).
func (r *Running[S]) waitToRun(ctx context.Context, id string, rec record, kick <-chan struct{}) waitEnd {
	if until := rec.runsAt(); r.clock.Now().Before(until) {
		if end := r.waitUntil(ctx, until, kick); end != waited {
			return end
		}
	}
	return r.holdStep(ctx, id, rec.attempt(), kick)
}

// commit commits a step run's outcome (unless the drive is stopping or
// the runner crashes here: stop) and counts it; it returns the record
// as written, or the write's error.
func (r *Running[S]) commit(d *drive, id string, ran ranStep) (rec record, stop bool, err error) {
	if d.ctx.Err() != nil || r.crashAt(pointAfterStep, id, ran.at) {
		tracing.End(ran.span, ran.errType)
		return record{}, true, nil // stopping or handing the shard over: not committed, the next owner runs the step again
	}
	ctx := d.callCtx()
	if ran.span.SpanContext().IsValid() {
		ctx = trace.ContextWithSpan(ctx, ran.span) // else ctx has no span either (the drive's carries none)
	}
	rec, err = r.here(ctx, id, commitMethod, ran.a)
	errType := ran.errType
	if err != nil && errType == "" {
		errType = "commit failed"
	}
	tracing.End(ran.span, errType)
	r.ran(ran.at.step, ran.a, rec, err)
	return rec, false, err
}

// read reads id's record, bounded by callTimeout (drive.callCtx).
func (r *Running[S]) read(d *drive, id string) (record, error) {
	return r.here(d.callCtx(), id, readMethod, components.Done{})
}

// here runs the record command method on id's entity on this instance
// (entities.Running.InvokeLocal: the runner runs only the workflows of the
// shards this instance serves), bounded by ctx (a drive's callCtx: past
// it the outcome of a commit is unknown, and the record is read again):
// on an idle entity, on this goroutine. A commit needs no command id to
// be applied once: one made again finds the transition it ran under gone,
// and changes nothing.
func (r *Running[S]) here(ctx context.Context, id, method string, arg any) (record, error) {
	v, err := r.entity.InvokeLocal(ctx, id, method, arg)
	if err != nil {
		return record{}, err
	}
	rec, ok := v.(record)
	if !ok {
		return record{}, fmt.Errorf("workflow %s/%s: %s replied a %T", r.t.id, id, method, v)
	}
	return rec, nil
}

// ran counts a run of step whose outcome a was committed as next: its
// duration, and a retry when the step is to run again.
func (r *Running[S]) ran(step string, a commitArg, next record, err error) {
	outcome := stepOK
	if a.Decision == nil {
		outcome = stepFailed
	}
	r.series.of(r.metrics, r.t.id, step, outcome).Observe(a.At.Sub(a.Started).Seconds())
	if err == nil && a.Decision == nil && next.Status == StatusRunning && next.Transition == a.Transition {
		r.series.of(r.metrics, r.t.id, step, stepRetries).Observe(1)
	}
}

// counts are the running and paused instances of the shards this
// instance serves, as last seen.
func (r *Running[S]) counts() (running, paused int) { return r.statuses.counts() }

// waitEnd is how a wait ended.
type waitEnd uint8

const (
	waited waitEnd = iota
	stopped
	kicked
)

// wait waits d on the runner's clock, or until ctx is done or kick fires.
func (r *Running[S]) wait(ctx context.Context, d time.Duration, kick <-chan struct{}) waitEnd {
	return r.waitUntil(ctx, r.clock.Now().Add(d), kick)
}

// waitUntil waits until at on the runner's clock, or until ctx is done
// or kick fires. A clock moved while the timer was being made (a fake
// one, in a test) still ends the wait at at.
func (r *Running[S]) waitUntil(ctx context.Context, at time.Time, kick <-chan struct{}) waitEnd {
	t, passed := clocks.TimerAt(r.clock, at)
	if passed {
		return waited
	}
	defer t.Stop()
	select {
	case <-t.Chan():
		return waited
	case <-kick:
		return kicked
	case <-ctx.Done():
		return stopped
	}
}

// serves reports whether this instance serves id's shard now, and is not
// handing it over.
func (r *Running[S]) serves(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.releasingLocked(id)
}

// fenceOf is the fence this instance serves id's shard under, or false.
func (r *Running[S]) fenceOf(id string) (cluster.Fence, bool) {
	if c := r.host.Entities.Cluster; c != nil {
		return c.Fence(r.t.id, id)
	}
	return r.serving(cluster.ShardOf(r.t.id, id))
}

// serving is Host.Shards.Serving, or every shard under no fence.
func (r *Running[S]) serving(shard int) (cluster.Fence, bool) {
	if r.host.Shards == nil {
		return cluster.Fence{}, true
	}
	return r.host.Shards.Serving(shard)
}

// TimerName is the name of the timer that wakes the paused workflow
// (componentID, workflowID).
func TimerName(componentID, workflowID string) string {
	return "workflow:" + componentID + ":" + workflowID
}

// arm creates (or replaces) the timer that wakes paused rec when its
// pause lapses or it times out, under the span of the step run that
// paused it, else under the command that started the workflow (its
// runs link to the timer's creation).
func (r *Running[S]) arm(id string, rec record) error {
	arg, err := json.Marshal(lapseArg{Transition: rec.Transition})
	if err != nil {
		return fmt.Errorf("arm the timer of workflow %s/%s: %w", r.t.id, id, err)
	}
	call := components.DeferredCall{ComponentID: r.t.id, Method: lapseMethod, EntityID: id, Argument: arg}
	ctx := r.ctx
	if sc, ok := tracing.Restore(cmp.Or(rec.PausedBy, rec.Trace)); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	if _, err := r.host.Timers.Create(ctx, TimerName(r.t.id, id), max(0, rec.wakeAt().Sub(r.clock.Now())), call); err != nil {
		return fmt.Errorf("arm the timer of workflow %s/%s: %w", r.t.id, id, err)
	}
	return nil
}

// watchShards resumes the workflows of every shard this instance comes to
// serve (every shard, without Host.Shards), until ctx ends (Stop, or a
// crash: done is closed then). The shards it finds newly served in one
// look are resumed in one read of the store (eachRecord).
func (r *Running[S]) watchShards(ctx context.Context, done chan<- struct{}) {
	defer r.loops.Done()
	defer close(done)
	var resumed [cluster.NumShards]*cluster.Fence // the fence a shard was resumed under
	var fences [cluster.NumShards]cluster.Fence   // the fence of each shard of due
	tick := time.NewTicker(shardsEvery)
	defer tick.Stop()
	for {
		for _, shard := range r.takeLapsed() {
			resumed[shard] = nil // its drives were stopped: resumed again once served
		}
		var due []int
		for shard := range cluster.NumShards {
			f, ok := r.serving(shard)
			switch {
			case !ok:
				if resumed[shard] != nil {
					r.statuses.drop(func(id string) bool { return cluster.ShardOf(r.t.id, id) == shard })
				}
				resumed[shard] = nil
			case resumed[shard] == nil || *resumed[shard] != f:
				fences[shard] = f
				due = append(due, shard)
			}
		}
		if len(due) > 0 {
			missed, err := r.resume(ctx, due)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				r.log.Warn("workflows: could not read the workflows of newly served shards; trying again", "shards", len(due), "err", err.Error())
			} else {
				for _, shard := range due {
					if !missed[shard] { // else looked at again at the next tick
						f := fences[shard] // a copy: fences changes at the next look
						resumed[shard] = &f
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// resume wakes every workflow of shards that runs or waits for its
// pause's timer: the shards' records, read from the store. missed names
// the shards of a workflow that could not be woken because the entities
// do not serve its shard yet (their view of the cluster follows the
// runner's): those are resumed again at the next look.
func (r *Running[S]) resume(ctx context.Context, shards []int) (missed map[int]bool, err error) {
	missed = make(map[int]bool)
	err = r.eachRecord(ctx, shards, func(shard int, id string, rec record) error {
		r.statuses.set(id, rec.Status)
		if !r.wake(id, rec) {
			missed[shard] = true
		}
		return nil
	}, func(id string, err error) error {
		r.log.Error("workflows: a stored record does not decode", "id", id, "err", err.Error())
		return nil
	})
	return missed, err
}
