package entities

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/components"
)

type effectKind uint8

const (
	replyOnly effectKind = iota + 1
	updateThenReply
	deleteThenReply
	failWith
)

// Effect is what a command handler decides: made by the methods of [Ctx],
// carried out by the entity (state written first, then the reply sent).
type Effect[S, R any] struct {
	kind    effectKind
	state   S
	reply   R
	refusal components.ErrorKind // with failWith
	message string
}

// Ctx is a command handler's view of its call. Its methods build the
// handler's effect; S is the entity's state type, R the command's reply.
type Ctx[S, R any] struct {
	ctx      context.Context
	entityID string
	client   *components.Client
}

// EntityID is the id of the entity the command is for.
func (c *Ctx[S, R]) EntityID() string { return c.entityID }

// Context is the caller's context (deadline, cancellation, values).
func (c *Ctx[S, R]) Context() context.Context { return c.ctx }

// Client is the component client, for calling other components.
func (c *Ctx[S, R]) Client() *components.Client { return c.client }

// UpdateState replaces the state with s; finish the effect with ThenReply.
func (c *Ctx[S, R]) UpdateState(s S) StateUpdate[S, R] { return StateUpdate[S, R]{state: s} }

// DeleteEntity resets the entity to its empty state and removes it from the
// store; finish the effect with ThenReply.
func (c *Ctx[S, R]) DeleteEntity() Deletion[S, R] { return Deletion[S, R]{} }

// Reply answers without changing the state.
func (c *Ctx[S, R]) Reply(r R) Effect[S, R] { return Effect[S, R]{kind: replyOnly, reply: r} }

// Error refuses the command with a message for the caller: a
// *components.CommandError of kind components.Failure (HTTP 400 through
// api.WriteError). The state is unchanged.
func (c *Ctx[S, R]) Error(format string, args ...any) Effect[S, R] {
	return c.Refuse(components.Failure, format, args...)
}

// NotFound refuses the command because what it is about does not exist
// (components.NotFound: HTTP 404). The state is unchanged.
func (c *Ctx[S, R]) NotFound(format string, args ...any) Effect[S, R] {
	return c.Refuse(components.NotFound, format, args...)
}

// Conflict refuses the command because it clashes with the state
// (components.Conflict: HTTP 409). The state is unchanged.
func (c *Ctx[S, R]) Conflict(format string, args ...any) Effect[S, R] {
	return c.Refuse(components.Conflict, format, args...)
}

// Invalid refuses the command because its argument breaks a business rule
// (components.Invalid: HTTP 422). The state is unchanged.
func (c *Ctx[S, R]) Invalid(format string, args ...any) Effect[S, R] {
	return c.Refuse(components.Invalid, format, args...)
}

// Refuse refuses the command with a *components.CommandError of kind kind;
// Error, NotFound, Conflict and Invalid are its short forms.
func (c *Ctx[S, R]) Refuse(kind components.ErrorKind, format string, args ...any) Effect[S, R] {
	return Effect[S, R]{kind: failWith, refusal: kind, message: fmt.Sprintf(format, args...)}
}

// StateUpdate is an update waiting for its reply.
type StateUpdate[S, R any] struct{ state S }

// ThenReply sends r once the new state is stored.
func (u StateUpdate[S, R]) ThenReply(r R) Effect[S, R] {
	return Effect[S, R]{kind: updateThenReply, state: u.state, reply: r}
}

// Deletion is a deletion waiting for its reply.
type Deletion[S, R any] struct{}

// ThenReply sends r once the state is deleted.
func (Deletion[S, R]) ThenReply(r R) Effect[S, R] {
	return Effect[S, R]{kind: deleteThenReply, reply: r}
}
