package eventsourced

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/components"
)

type effectKind uint8

const (
	replyOnly effectKind = iota + 1
	persistThenReply
	deleteThenReply
	failWith
)

// Effect is what a command handler decides: made by the methods of [Ctx],
// carried out by the entity (events written first, then the reply sent).
type Effect[S, R any] struct {
	kind    effectKind
	events  []any
	reply   func(S) R
	value   R
	refusal *components.CommandError
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

// Persist appends events (values of the entity's event types, in order)
// to the journal; finish the effect with ThenReply. No event is written
// unless all are.
func (c *Ctx[S, R]) Persist(events ...any) Persistence[S, R] {
	return Persistence[S, R]{events: events}
}

// DeleteEntity appends events (none, or some last ones) and marks the
// entity deleted: its journal is kept, and every later command on it is
// refused (components.NotFound). Finish the effect with ThenReply.
func (c *Ctx[S, R]) DeleteEntity(events ...any) Deletion[S, R] { return Deletion[S, R]{events: events} }

// Reply answers without persisting anything.
func (c *Ctx[S, R]) Reply(r R) Effect[S, R] { return Effect[S, R]{kind: replyOnly, value: r} }

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

// Refuse refuses the command with a *components.CommandError of kind
// kind; nothing is persisted.
func (c *Ctx[S, R]) Refuse(kind components.ErrorKind, format string, args ...any) Effect[S, R] {
	return Effect[S, R]{kind: failWith, refusal: &components.CommandError{Kind: kind, Message: fmt.Sprintf(format, args...)}}
}

// Persistence is a persist waiting for its reply.
type Persistence[S, R any] struct{ events []any }

// ThenReply answers, once the events are written, with reply's result on
// the state after them.
func (p Persistence[S, R]) ThenReply(reply func(state S) R) Effect[S, R] {
	return Effect[S, R]{kind: persistThenReply, events: p.events, reply: reply}
}

// Deletion is a delete waiting for its reply.
type Deletion[S, R any] struct{ events []any }

// ThenReply sends r once the entity is marked deleted.
func (d Deletion[S, R]) ThenReply(r R) Effect[S, R] {
	return Effect[S, R]{kind: deleteThenReply, events: d.events, value: r}
}
