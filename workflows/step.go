package workflows

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
)

// StepCtx is a step handler's view of its run; its methods build the
// step's effect.
type StepCtx[S any] struct {
	ctx        context.Context
	workflowID string
	client     *components.Client
	step       string
	attempt    int
	transition uint64
	key        string
}

// Context is the run's context: cancelled past the step's timeout, and
// carrying the run's idempotency key (components.WithIdempotencyKey), so
// that an entity command invoked with it is applied once however often
// the step runs.
func (c *StepCtx[S]) Context() context.Context { return c.ctx }

// Client is the component client.
func (c *StepCtx[S]) Client() *components.Client { return c.client }

// WorkflowID is the id of the workflow instance.
func (c *StepCtx[S]) WorkflowID() string { return c.workflowID }

// Step is the step's name.
func (c *StepCtx[S]) Step() string { return c.step }

// Attempt is the run's attempt, from 1.
func (c *StepCtx[S]) Attempt() int { return c.attempt }

// IdempotencyKey is the run's stable id: the same for every attempt of
// the step under one transition, and after a crash, and different for
// every other step run. It is what Context carries; pass it on to the
// systems a step calls out to (an Idempotency-Key header), and derive one
// per call (key + ":2") when a step invokes the same command of one
// entity twice.
func (c *StepCtx[S]) IdempotencyKey() string { return c.key }

// NewRequest is a request for a call out of Trellis: on the run's context
// (cancelled past the step's timeout), with the run's key in its
// Idempotency-Key header, so that a system that honours the header applies
// the call once however often the step runs.
func (c *StepCtx[S]) NewRequest(method, url string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(c.ctx, method, url, body)
	if err != nil {
		return nil, fmt.Errorf("step %q: %w", c.step, err)
	}
	req.Header.Set(api.HeaderIdempotencyKey, c.key)
	return req, nil
}

// StepKey is the idempotency key of the run of step entered by transition
// of run (the instance, see Run in the record) of workflow (componentID,
// workflowID).
func StepKey(componentID, workflowID, run, step string, transition uint64) string {
	return "workflow:" + componentID + ":" + workflowID + ":" + run + ":" + step + ":" + strconv.FormatUint(transition, 10)
}

// StepEffect is what a step decides: made by the methods of [StepCtx] and
// [StepDecision].
type StepEffect[S any] struct {
	set    bool
	update bool
	state  S
	move   move
	err    error
}

// StepDecision is a step's new state, waiting for its move.
type StepDecision[S any] struct {
	state S
}

// UpdateState replaces the workflow's state with s; finish the effect
// with a move.
func (c *StepCtx[S]) UpdateState(s S) StepDecision[S] { return StepDecision[S]{state: s} }

// TransitionTo moves the workflow to step with input.
func (c *StepCtx[S]) TransitionTo(step string, input any) StepEffect[S] {
	return StepEffect[S]{set: true, move: move{kind: transition, step: step, input: input}}
}

// Pause pauses the workflow until a command moves it.
func (c *StepCtx[S]) Pause() StepEffect[S] { return StepEffect[S]{set: true, move: move{kind: pause}} }

// PauseFor pauses the workflow until a command moves it or, after d,
// moves it to step with input.
func (c *StepCtx[S]) PauseFor(d time.Duration, step string, input any) StepEffect[S] {
	return StepEffect[S]{set: true, move: move{kind: pause, pauseFor: d, lapse: step, lapseInput: input}}
}

// End ends the workflow.
func (c *StepCtx[S]) End() StepEffect[S] { return StepEffect[S]{set: true, move: move{kind: end}} }

// EndAndDelete ends the workflow and deletes its record.
func (c *StepCtx[S]) EndAndDelete() StepEffect[S] {
	return StepEffect[S]{set: true, move: move{kind: endDelete}}
}

// Fail fails this run: it is retried after its backoff, and when it runs
// out of retries the workflow goes to the step's failover step (or fails).
// A panic or a run past the step's timeout fails the same way.
func (c *StepCtx[S]) Fail(format string, args ...any) StepEffect[S] {
	return StepEffect[S]{set: true, err: fmt.Errorf(format, args...)}
}

// TransitionTo moves the workflow to step with input.
func (d StepDecision[S]) TransitionTo(step string, input any) StepEffect[S] {
	return StepEffect[S]{set: true, update: true, state: d.state, move: move{kind: transition, step: step, input: input}}
}

// Pause pauses the workflow until a command moves it.
func (d StepDecision[S]) Pause() StepEffect[S] {
	return StepEffect[S]{set: true, update: true, state: d.state, move: move{kind: pause}}
}

// PauseFor pauses the workflow until a command moves it or, after
// after, moves it to step with input.
func (d StepDecision[S]) PauseFor(after time.Duration, step string, input any) StepEffect[S] {
	return StepEffect[S]{set: true, update: true, state: d.state, move: move{kind: pause, pauseFor: after, lapse: step, lapseInput: input}}
}

// End ends the workflow.
func (d StepDecision[S]) End() StepEffect[S] {
	return StepEffect[S]{set: true, update: true, state: d.state, move: move{kind: end}}
}
