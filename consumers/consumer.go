package consumers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Consumer is the definition of a consumer: its id, the entity type whose
// changes it gets, and its handler. It holds no running state.
type Consumer[S any] struct {
	id         string
	entity     *entities.Type[S]
	handler    func(ctx *Ctx, c Change[S]) Effect
	maxRetries int
}

// Change is one change of an entity as a handler gets it: its new state
// and revision, or its deletion.
type Change[S any] struct {
	EntityID string
	// State is the entity's state at Revision; the entity's empty state
	// when Deleted.
	State S
	// Revision is the state's revision; for a deletion, the revision of
	// the state deleted. Revisions of one entity grow from change to
	// change.
	Revision uint64
	Deleted  bool
	// At is when the change was recorded (the store's clock), about;
	// zero for a state read to catch up (see the package doc).
	At time.Time
}

// Option configures a consumer.
type Option func(*options)

type options struct{ maxRetries int }

// WithMaxRetries bounds how many times a failed change is retried: after
// n retries that failed it becomes a dead letter and the entity's next
// changes go on. 0 (the default) retries forever.
func WithMaxRetries(n int) Option { return func(o *options) { o.maxRetries = max(n, 0) } }

// Define defines a consumer of entity's changes with a stable id (its
// checkpoints and dead letters are kept under it: renaming a consumer
// starts a new one). handler may be a method value of a value that holds
// the consumer's dependencies (see the package doc).
func Define[S any](id string, entity *entities.Type[S], handler func(ctx *Ctx, c Change[S]) Effect, opts ...Option) *Consumer[S] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Consumer[S]{id: id, entity: entity, handler: handler, maxRetries: o.maxRetries}
}

// ID is the consumer's id.
func (c *Consumer[S]) ID() string { return c.id }

// Ctx is a handler's view of its call.
type Ctx struct {
	ctx    context.Context
	client *components.Client
}

// Context is the call's context: it ends when the consumer is stopped
// for good (the service shuts down, or the shard is handed over and the
// hand-over's wait ran out), or after Config.HandlerTimeout.
func (c *Ctx) Context() context.Context { return c.ctx }

// Client is the component client: a handler may invoke components and
// create timers through it.
func (c *Ctx) Client() *components.Client { return c.client }

// Effect is how a handler ends: Done, Ignore or Error.
type Effect struct {
	kind    effectKind
	message string
}

type effectKind int

const (
	effectNone effectKind = iota
	effectDone
	effectIgnore
	effectError
)

// Done ends the call: the change was handled.
func (c *Ctx) Done() Effect { return Effect{kind: effectDone} }

// Ignore ends the call: the change is of no interest; it counts as handled.
func (c *Ctx) Ignore() Effect { return Effect{kind: effectIgnore} }

// Error ends the call in failure: the change is retried with backoff
// (3 s, 6 s, 12 s, 24 s, then every 30 s); the entity's later changes
// wait, coalesced into the retry (it handles the latest state).
func (c *Ctx) Error(format string, args ...any) Effect {
	return Effect{kind: effectError, message: fmt.Sprintf(format, args...)}
}

// Start adds the consumer to r, the service's consumers: it consumes once
// r is started, on the shards this instance serves. It fails when the
// service's store keeps no change log, or when a consumer with the same
// id was added already.
func (c *Consumer[S]) Start(r *Runner) (*Running, error) {
	if c.id == "" || c.entity == nil || c.handler == nil {
		return nil, errors.New("consumers: Define needs an id, an entity type and a handler")
	}
	return r.add(&consumer{id: c.id, entityType: c.entity.ComponentID(), maxRetries: c.maxRetries, handle: c.handle})
}

// handle decodes a change and runs the handler on it; a panic is an
// error.
func (c *Consumer[S]) handle(ctx context.Context, client *components.Client, ch change) (ignored bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("consumer %s: the handler panicked: %v", c.id, p)
		}
	}()
	rev := ch.Revision
	if ch.Deleted {
		rev = 0
	}
	state, err := c.entity.Decode(ch.EntityID, rev, ch.Data)
	if err != nil {
		return false, fmt.Errorf("consumer %s: %w", c.id, err)
	}
	e := c.handler(&Ctx{ctx: ctx, client: client}, Change[S]{EntityID: ch.EntityID, State: state, Revision: ch.Revision, Deleted: ch.Deleted, At: ch.At})
	switch e.kind {
	case effectDone:
		return false, nil
	case effectIgnore:
		return true, nil
	case effectError:
		return false, errors.New(e.message)
	}
	return false, fmt.Errorf("consumer %s returned no effect (the zero Effect)", c.id)
}

// consumer is a consumer with its state type erased, as the runner keeps
// it.
type consumer struct {
	id         string
	entityType string
	maxRetries int
	handle     func(ctx context.Context, client *components.Client, ch change) (ignored bool, err error)
}

// change is an entities.Change as the runner handles it.
type change = entities.Change
