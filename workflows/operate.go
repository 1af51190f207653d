package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// operateMethod is the platform's command of an operator's action.
const operateMethod = internalPrefix + "operate"

// Action is an operator's action on a workflow instance.
type Action string

// The operator's actions.
const (
	// Suspend stops a running workflow where it stands (its status
	// becomes paused, a run of its step that is under way has its outcome
	// dropped) until Resume.
	Suspend Action = "suspend"
	// Resume runs a suspended workflow's step again, under the same key
	// (its entity commands stay applied once); on a workflow paused with a
	// lapse step, it lapses now.
	Resume Action = "resume"
	// Cancel ends the workflow (ended, "cancelled by an operator"); no
	// compensation runs.
	Cancel Action = "cancel"
	// Retry runs the current step now: a running workflow's wait for its
	// retry is cut short; a failed (or suspended) workflow runs its step
	// again from its first attempt, under the same key.
	Retry Action = "retry"
	// Skip moves the workflow to a named step with an input (a new
	// transition, a new key), whatever it stands at, a failed workflow
	// included.
	Skip Action = "skip"
)

// cancelled is the error of an instance an operator cancelled.
const cancelled = "cancelled by an operator"

// Operation is an operator's action with, for Skip, its step and input.
type Operation struct {
	Action Action          `json:"action"`
	Step   string          `json:"step,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// operatorCommand adds the operate command to et.
func (r *Running[S]) operatorCommand(et *entities.Type[record]) {
	entities.Command(et, operateMethod, func(ctx *entities.Ctx[record, record], rec record, op Operation) entities.Effect[record, record] {
		next, err := r.operate(ctx.EntityID(), rec, op)
		if err == nil {
			r.observe(ctx.EntityID(), rec, next, false)
		}
		if err != nil {
			var cmdErr *components.CommandError
			if errors.As(err, &cmdErr) {
				return ctx.Refuse(cmdErr.Kind, "%s", cmdErr.Message)
			}
			return ctx.Error("%v", err)
		}
		r.wake(ctx.EntityID(), next)
		return ctx.UpdateState(next).ThenReply(next.detached())
	})
}

// refusal is a refusal of an operation, as a command's.
func refusal(kind components.ErrorKind, format string, args ...any) error {
	return &components.CommandError{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// operate is rec after op, or a refusal (*components.CommandError).
func (r *Running[S]) operate(id string, rec record, op Operation) (record, error) {
	name := r.t.id + "/" + id
	switch rec.Status {
	case StatusNotStarted:
		return rec, refusal(components.NotFound, "workflow %s has not started", name)
	case StatusEnded:
		return rec, refusal(components.Conflict, "workflow %s has ended: it takes no more changes", name)
	}
	entry := Entry{Transition: rec.Transition, At: r.clock.Now()}
	switch op.Action {
	case Suspend:
		if rec.Status != StatusRunning {
			return rec, refusal(components.Conflict, "workflow %s is %s: only a running workflow can be suspended", name, rec.Status)
		}
		rec.Status, rec.Suspended, rec.NotBefore = StatusPaused, true, time.Time{}
		rec.Entered = rec.entered()
		rec.Transition++
		entry.Outcome = "suspended"
	case Resume:
		switch {
		case rec.Suspended:
			r.rerun(&rec)
			entry.Outcome = "resumed"
		case rec.Status == StatusPaused && rec.OnLapse != nil:
			entry.Outcome = "resumed: to " + rec.OnLapse.Step
			rec.enter(rec.OnLapse.Step, rec.OnLapse.Input, entry.At)
		default:
			return rec, refusal(components.Conflict, "workflow %s is %s and not suspended: skip it to a step instead", name, rec.Status)
		}
	case Cancel:
		rec.leave(StatusEnded)
		rec.Error = cancelled
		entry.Outcome = "cancelled"
	case Retry:
		switch {
		case rec.Step == "":
			return rec, refusal(components.Conflict, "workflow %s is %s at no step: skip it to a step instead", name, rec.Status)
		case rec.Status == StatusRunning:
			rec.NotBefore = time.Time{}
			entry.Outcome = "retry now"
		default:
			if strings.HasPrefix(rec.Error, staleKeysPrefix) {
				// The operator runs it again knowing its keys may have
				// expired: they count from now.
				rec.EnteredAt = entry.At
			}
			r.rerun(&rec)
			rec.Attempt = 0
			entry.Outcome = "retried"
		}
	case Skip:
		if r.t.step(op.Step) == nil {
			return rec, refusal(components.Invalid, "step: workflow %s has no step %q (its steps: %v)", r.t.id, op.Step, r.t.Steps())
		}
		if len(op.Input) > 0 && !json.Valid(op.Input) {
			return rec, refusal(components.Invalid, "input: not JSON")
		}
		if n := len(rec.State) + len(op.Input); n > MaxRecordBytes {
			return rec, refusal(components.Invalid, "input: the state and the step's input are %d bytes, over the limit of %d", n, MaxRecordBytes)
		}
		entry.Outcome = "skipped to " + op.Step
		rec.enter(op.Step, op.Input, entry.At)
	default:
		return rec, refusal(components.Invalid, "action: %q is not one of suspend, resume, cancel, retry, skip", op.Action)
	}
	rec.note(entry)
	return rec, nil
}

// rerun makes rec's step run again under the key it was entered with.
func (r *Running[S]) rerun(rec *record) {
	rec.Entered = rec.entered()
	rec.Status, rec.Suspended, rec.NotBefore, rec.Error = StatusRunning, false, time.Time{}, ""
	rec.PauseUntil, rec.OnLapse = time.Time{}, nil
	rec.Transition++
}

// Operate carries out an operator's action on instance id, on the owner of
// its shard, and returns the instance after it. A refusal is a
// *components.CommandError: NotFound for an instance that has not
// started, Conflict for one that ended or an action its status does not
// take, Invalid for an unknown action or step or an input over the limit.
func (r *Running[S]) Operate(ctx context.Context, id string, op Operation) (Record, error) {
	rec, err := r.operation.Invoke(ctx, r.host.Entities.Client, id, op)
	if err != nil {
		return Record{}, fmt.Errorf("%s workflow %s/%s: %w", op.Action, r.t.id, id, err)
	}
	return rec.public(r.t.id, id), nil
}
