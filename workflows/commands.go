package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/tracing"
)

// The platform's commands on a workflow's record.
const (
	getMethod    = internalPrefix + "get"    // the record
	readMethod   = internalPrefix + "read"   // the record without its history, shared with the entity: the runner's, which only reads it
	commitMethod = internalPrefix + "commit" // a step's outcome; its reply is the record without its history
	lapseMethod  = internalPrefix + "lapse"  // a pause lapsed or the workflow timed out (its timer)
)

// MaxRecordBytes bounds a workflow's stored state plus its step's input
// (and, while it is paused, the input of the step its pause lapses to).
const MaxRecordBytes = 1 << 20

// errBadMove is wrapped by a move that cannot be made: to a step that
// does not exist, or past the size limit.
var errBadMove = errors.New("bad move")

// commitArg is a step run's outcome, for the commit command.
type commitArg struct {
	// Transition is the transition the step ran under: the outcome
	// commits only while it is the record's.
	Transition uint64 `json:"transition"`
	// Started and At are when the run started and ended (the runner's
	// clock).
	Started time.Time `json:"started"`
	At      time.Time `json:"at"`
	// Decision is the step's effect; nil when the run failed.
	Decision *decision `json:"decision,omitempty"`
	// Error is why the run failed; Permanent when running it again cannot
	// help, Missing when the code has no such step any more.
	Error     string `json:"error,omitempty"`
	Permanent bool   `json:"permanent,omitempty"`
	Missing   bool   `json:"missing,omitempty"`
	// Stale: the step was not run, for its keys may have expired
	// (staleKeys); like Missing, the workflow fails for an operator.
	Stale bool `json:"stale,omitempty"`
	// TimedOut: the workflow's deadline passed before the run.
	TimedOut bool `json:"timedOut,omitempty"`
	// Span is the run's span (tracing.CaptureForLink: "" unless
	// sampled), which the timer of a pause the run decided is created
	// under.
	Span string `json:"span,omitempty"`
}

// lapseArg is a pause timer's argument: the transition that paused.
type lapseArg struct {
	Transition uint64 `json:"transition"`
}

// internalCommands adds the platform's commands to et.
func (r *Running[S]) internalCommands(et *entities.Type[record]) {
	entities.Command(et, getMethod, func(ctx *entities.Ctx[record, record], rec record, _ components.Done) entities.Effect[record, record] {
		return ctx.Reply(rec.detached())
	})
	entities.Command(et, readMethod, func(ctx *entities.Ctx[record, record], rec record, _ components.Done) entities.Effect[record, record] {
		return ctx.Reply(rec.withoutHistory())
	})
	entities.Command(et, commitMethod, func(ctx *entities.Ctx[record, record], rec record, a commitArg) entities.Effect[record, record] {
		next, deleted, changed := r.committed(ctx.EntityID(), rec, a)
		if changed {
			r.observe(ctx.EntityID(), rec, next, deleted)
		}
		switch {
		case !changed:
			return ctx.Reply(rec.withoutHistory())
		case deleted:
			return ctx.DeleteEntity().ThenReply(record{})
		}
		return ctx.UpdateState(next).ThenReply(next.withoutHistory())
	})
	entities.Command(et, lapseMethod, func(ctx *entities.Ctx[record, components.Done], rec record, a lapseArg) entities.Effect[record, components.Done] {
		if rec.Transition != a.Transition || rec.Status != StatusPaused {
			return ctx.Reply(components.Done{}) // moved on since: the timer is stale
		}
		now := r.clock.Now()
		before := rec
		entry := Entry{Transition: rec.Transition, At: now}
		switch {
		case !rec.Deadline.IsZero() && !now.Before(rec.Deadline):
			rec = r.timedOut(ctx.EntityID(), rec, entry)
		case !rec.PauseUntil.IsZero() && !now.Before(rec.PauseUntil) && rec.OnLapse != nil:
			entry.Outcome = "lapsed to " + rec.OnLapse.Step
			rec.enter(rec.OnLapse.Step, rec.OnLapse.Input, now)
			rec.note(entry)
		default: // early (another clock): wait again
			r.wake(ctx.EntityID(), rec)
			return ctx.Reply(components.Done{})
		}
		r.observe(ctx.EntityID(), before, rec, false)
		r.wake(ctx.EntityID(), rec)
		return ctx.UpdateState(rec).ThenReply(components.Done{})
	})
}

// runCommand runs a user's command on rec and makes its entity effect:
// the record with the command's change (refused when the workflow is
// over, or the move is bad), then the reply.
func runCommand[S, R any](r *Running[S], ectx *entities.Ctx[record, R], rec record,
	handler func(ctx *Ctx[S, R], state S) Effect[S, R]) entities.Effect[record, R] {
	id := ectx.EntityID()
	state, err := r.t.decode(id, rec)
	if err != nil {
		return ectx.Error("%v", err)
	}
	eff := handler(&Ctx[S, R]{ctx: ectx.Context(), workflowID: id, client: ectx.Client(), status: rec.Status, step: rec.Step}, state)
	switch eff.kind {
	case replyOnly:
		return ectx.Reply(eff.reply)
	case refuse:
		return ectx.Refuse(eff.refusal, "%s", eff.message)
	case moveThenReply:
	default:
		return ectx.Error("workflow %s/%s: the command returned no effect (the zero Effect)", r.t.id, id)
	}
	if rec.Status.over() {
		return ectx.Conflict("workflow %s/%s has %s: it takes no more changes", r.t.id, id, rec.Status)
	}
	d, err := encodeMove(eff.update, eff.state, eff.move)
	if err != nil {
		return ectx.Invalid("workflow %s/%s: %v", r.t.id, id, err)
	}
	next, _, err := r.apply(rec, d, r.clock.Now(), Entry{Transition: rec.Transition})
	if err != nil {
		return ectx.Invalid("workflow %s/%s: %v", r.t.id, id, err)
	}
	if rec.Status == StatusNotStarted && next.Status != StatusNotStarted {
		next.Trace = tracing.CaptureForLink(ectx.Context())
	}
	r.observe(id, rec, next, false)
	r.wake(id, next)
	return ectx.UpdateState(next).ThenReply(eff.reply)
}

// apply carries out d on rec at now: the state, then the move, noted in
// the history as entry. deleted: the record is to be deleted. The error
// wraps errBadMove.
func (r *Running[S]) apply(rec record, d decision, now time.Time, entry Entry) (next record, deleted bool, err error) {
	if d.Update {
		rec.State = d.State
	}
	if rec.Status == StatusNotStarted && d.Move != stay {
		rec.Run = uuid.NewString()[:8]
		if r.t.settings.timeout > 0 {
			rec.Deadline = now.Add(r.t.settings.timeout)
		}
	}
	switch d.Move {
	case transition:
		if r.t.step(d.Step) == nil {
			return rec, false, fmt.Errorf("%w: transition to step %q, which workflow %s does not have", errBadMove, d.Step, r.t.id)
		}
		rec.enter(d.Step, d.Input, now)
	case pause:
		timed := d.PauseFor != 0 || d.Lapse != nil
		if timed && (d.Lapse == nil || r.t.step(d.Lapse.Step) == nil) {
			return rec, false, fmt.Errorf("%w: a pause lapses to step %q, which workflow %s does not have", errBadMove, d.lapseStep(), r.t.id)
		}
		rec.leave(StatusPaused)
		if timed {
			// A pause of no time, or less (one counted to a moment that
			// has passed), lapses at once.
			rec.PauseUntil, rec.OnLapse = now.Add(max(d.PauseFor, 0)), d.Lapse
		}
	case end:
		rec.leave(StatusEnded)
	case endDelete:
		return rec, true, nil
	}
	if n := rec.inputBytes(); n > MaxRecordBytes {
		return rec, false, fmt.Errorf("%w: the state and the steps' inputs are %d bytes, over the limit of %d: %w",
			errBadMove, n, MaxRecordBytes, components.ErrLimit)
	}
	if d.Move != stay {
		entry.Outcome, entry.At = d.outcome(), now
		rec.note(entry)
	}
	return rec, false, nil
}

// lapseStep names a pause's lapse step in errors.
func (d decision) lapseStep() string {
	if d.Lapse == nil {
		return ""
	}
	return d.Lapse.Step
}

// committed is rec after a step's outcome a, or changed false when the
// outcome is stale (the workflow moved on since the run started).
func (r *Running[S]) committed(id string, rec record, a commitArg) (next record, deleted, changed bool) {
	if rec.Transition != a.Transition || rec.Status != StatusRunning {
		return rec, false, false
	}
	entry := Entry{Transition: a.Transition, Step: rec.Step, Attempt: rec.Attempt + 1, Started: a.Started, At: a.At}
	if a.TimedOut {
		return r.timedOut(id, rec, entry), false, true
	}
	if a.Decision != nil {
		next, deleted, err := r.apply(rec, *a.Decision, a.At, entry)
		if err == nil {
			if next.Status == StatusPaused {
				next.PausedBy = a.Span
			}
			return next, deleted, true
		}
		a.Error, a.Permanent = err.Error(), true
	}
	if !a.Missing && !a.Stale && !rec.Deadline.IsZero() && !a.At.Before(rec.Deadline) {
		// Failed at the workflow's deadline (its timeout cut the run
		// short) or past it: the workflow timed out; no retry is left.
		return r.timedOut(id, rec, entry), false, true
	}
	return r.failed(id, rec, a, entry), false, true
}

// failed is rec after a failed run: retried after its backoff while it
// has retries, else moved to its failover step, else failed.
func (r *Running[S]) failed(id string, rec record, a commitArg, entry Entry) record {
	set := r.t.settings
	if def := r.t.step(rec.Step); def != nil {
		set = def.settings
	}
	entry.Error = a.Error
	attempts := rec.Attempt + 1
	if !a.Permanent && !a.Missing && !a.Stale && attempts <= set.maxRetries {
		rec.Attempt, rec.Error = attempts, a.Error
		rec.NotBefore = a.At.Add(set.retryAfter(attempts))
		entry.Outcome = "retry"
		rec.note(entry)
		return rec
	}
	if set.failover != nil && !a.Missing && !a.Stale {
		if input, err := json.Marshal(set.failover.input); err == nil && r.t.step(set.failover.step) != nil {
			entry.Outcome = "failover to " + set.failover.step
			rec.enter(set.failover.step, input, a.At)
			rec.Error = a.Error
			rec.note(entry)
			return rec
		}
		r.log.Error("workflows: the failover step is not defined, or its input does not encode: the workflow fails",
			"id", id, "step", set.failover.step)
	}
	entry.Outcome = "failed"
	rec.fail(a.Error)
	rec.note(entry)
	return rec
}

// timedOut is rec once its deadline passed: moved to the workflow's
// timeout step, else failed.
func (r *Running[S]) timedOut(id string, rec record, entry Entry) record {
	rec.Deadline = time.Time{}
	if f := r.t.settings.onTimeout; f != nil {
		if input, err := json.Marshal(f.input); err == nil && r.t.step(f.step) != nil {
			entry.Outcome = "timed out: to " + f.step
			rec.enter(f.step, input, entry.At)
			rec.note(entry)
			return rec
		}
		r.log.Error("workflows: the timeout step is not defined, or its input does not encode: the workflow fails", "id", id, "step", f.step)
	}
	entry.Outcome = "timed out"
	rec.fail("the workflow timed out")
	rec.note(entry)
	return rec
}
