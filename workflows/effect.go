package workflows

import (
	"context"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
)

// Ctx is a command handler's view of its call; its methods build the
// handler's effect. S is the workflow's state type, R the command's reply.
type Ctx[S, R any] struct {
	ctx        context.Context
	workflowID string
	client     *components.Client
	status     Status
	step       string
}

// WorkflowID is the id of the workflow instance the command is for.
func (c *Ctx[S, R]) WorkflowID() string { return c.workflowID }

// Context is the caller's context.
func (c *Ctx[S, R]) Context() context.Context { return c.ctx }

// Client is the component client.
func (c *Ctx[S, R]) Client() *components.Client { return c.client }

// Status is where the workflow stands (StatusNotStarted before its first move).
func (c *Ctx[S, R]) Status() Status { return c.status }

// CurrentStep is the step the workflow runs, "" when it runs none.
func (c *Ctx[S, R]) CurrentStep() string { return c.step }

// effectKind is what a command's effect does.
type effectKind uint8

const (
	replyOnly effectKind = iota + 1
	moveThenReply
	refuse
)

// Effect is what a command handler decides: made by the methods of [Ctx]
// and [Decision], carried out on the workflow's record (written first,
// then the reply sent).
type Effect[S, R any] struct {
	kind    effectKind
	update  bool
	state   S
	move    move
	reply   R
	refusal components.ErrorKind
	message string
}

// Decision is a command's change of the workflow waiting for its reply
// (ThenReply), and possibly for a move (TransitionTo, Pause, End).
type Decision[S, R any] struct {
	update bool
	state  S
	move   move
}

// UpdateState replaces the workflow's state with s.
func (c *Ctx[S, R]) UpdateState(s S) Decision[S, R] { return Decision[S, R]{update: true, state: s} }

// TransitionTo moves the workflow to step with input: a new transition,
// whose step the owner runs next (a step running meanwhile has its
// outcome dropped).
func (c *Ctx[S, R]) TransitionTo(step string, input any) Decision[S, R] {
	return Decision[S, R]{}.TransitionTo(step, input)
}

// Pause pauses the workflow until a command moves it.
func (c *Ctx[S, R]) Pause() Decision[S, R] { return Decision[S, R]{}.Pause() }

// PauseFor pauses the workflow until a command moves it or, after d,
// moves it to step with input (a Trellis timer: it survives restarts).
func (c *Ctx[S, R]) PauseFor(after time.Duration, step string, input any) Decision[S, R] {
	return Decision[S, R]{}.PauseFor(after, step, input)
}

// End ends the workflow.
func (c *Ctx[S, R]) End() Decision[S, R] { return Decision[S, R]{}.End() }

// Reply answers without changing the workflow.
func (c *Ctx[S, R]) Reply(r R) Effect[S, R] { return Effect[S, R]{kind: replyOnly, reply: r} }

// Error refuses the command (components.Failure: HTTP 400).
func (c *Ctx[S, R]) Error(format string, args ...any) Effect[S, R] {
	return c.Refuse(components.Failure, format, args...)
}

// NotFound refuses the command (components.NotFound: HTTP 404).
func (c *Ctx[S, R]) NotFound(format string, args ...any) Effect[S, R] {
	return c.Refuse(components.NotFound, format, args...)
}

// Conflict refuses the command (components.Conflict: HTTP 409).
func (c *Ctx[S, R]) Conflict(format string, args ...any) Effect[S, R] {
	return c.Refuse(components.Conflict, format, args...)
}

// Invalid refuses the command (components.Invalid: HTTP 422).
func (c *Ctx[S, R]) Invalid(format string, args ...any) Effect[S, R] {
	return c.Refuse(components.Invalid, format, args...)
}

// Refuse refuses the command with a *components.CommandError of kind kind.
func (c *Ctx[S, R]) Refuse(kind components.ErrorKind, format string, args ...any) Effect[S, R] {
	return Effect[S, R]{kind: refuse, refusal: kind, message: fmt.Sprintf(format, args...)}
}

// TransitionTo moves the workflow to step with input.
func (d Decision[S, R]) TransitionTo(step string, input any) Decision[S, R] {
	d.move = move{kind: transition, step: step, input: input}
	return d
}

// Pause pauses the workflow until a command moves it.
func (d Decision[S, R]) Pause() Decision[S, R] {
	d.move = move{kind: pause}
	return d
}

// PauseFor pauses the workflow until a command moves it or, after d,
// moves it to step with input (a Trellis timer: it survives restarts).
func (d Decision[S, R]) PauseFor(after time.Duration, step string, input any) Decision[S, R] {
	d.move = move{kind: pause, pauseFor: after, lapse: step, lapseInput: input}
	return d
}

// End ends the workflow.
func (d Decision[S, R]) End() Decision[S, R] {
	d.move = move{kind: end}
	return d
}

// ThenReply sends r once the workflow's record is written.
func (d Decision[S, R]) ThenReply(r R) Effect[S, R] {
	return Effect[S, R]{kind: moveThenReply, update: d.update, state: d.state, move: d.move, reply: r}
}
