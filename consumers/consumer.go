package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/timers"
)

// Consumer is the definition of a consumer: its id, the entity type (or
// workflow type) whose changes it gets, and its handler. It holds no
// running state.
type Consumer[S any] struct {
	id      string
	source  string // the component id of the entity or workflow type
	decode  func(id string, rev uint64, data []byte) (S, error)
	handler func(ctx *Ctx, c Change[S]) Effect
	opts    options
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

type options struct {
	maxRetries int
	coalesce   bool
	timeout    time.Duration
}

// WithMaxRetries bounds how many times a failed change is retried: after
// n retries that failed it becomes a dead letter and the entity's next
// changes go on. 0 (the default) retries forever.
func WithMaxRetries(n int) Option { return func(o *options) { o.maxRetries = max(n, 0) } }

// WithCoalescing makes the consumer handle the latest state of an entity
// rather than each of its changes while one of them is retried: the
// entity's later changes replace the failed one, and the handler never
// sees the states in between (nor a deletion followed by a new state).
// It suits a handler that only acts on where an entity stands (a read
// model, a cache); without it every change is handled, in order.
func WithCoalescing() Option { return func(o *options) { o.coalesce = true } }

// WithHandlerTimeout bounds one call of the handler (the call's context
// ends after d; the change is then retried). Without it the runner's
// Config.HandlerTimeout applies (DefaultHandlerTimeout, 30 s).
func WithHandlerTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = max(d, 0) }
}

// Define defines a consumer of entity's changes with a stable id (its
// checkpoints and dead letters are kept under it: renaming a consumer
// starts a new one). handler may be a method value of a value that holds
// the consumer's dependencies (see the package doc).
func Define[S any](id string, entity *entities.Type[S], handler func(ctx *Ctx, c Change[S]) Effect, opts ...Option) *Consumer[S] {
	c := define(id, handler, opts)
	if entity != nil {
		c.source, c.decode = entity.ComponentID(), entity.Decode
	}
	return c
}

// WorkflowSource is a workflow type (workflows.Type) as a consumer's
// source: its component id, and how a stored record of one of its
// instances reads as the instance (workflows.Instance: its state, status
// and step).
type WorkflowSource[I any] interface {
	ComponentID() string
	DecodeInstance(id string, record []byte) (I, error)
}

// DefineWorkflow defines a consumer of the changes of a workflow type's
// instances: each transition, step outcome and operator's move of an
// instance is a change (Change.State the instance as stored after it;
// for a deletion, Deleted with the zero instance), in order, as Define's
// consumers get an entity's. A workflow's record is an entity's state,
// written with its change in the shard's change log, so the consumer
// sees what Define's see, when they see it, with the same options.
func DefineWorkflow[I any](id string, source WorkflowSource[I], handler func(ctx *Ctx, c Change[I]) Effect, opts ...Option) *Consumer[I] {
	c := define(id, handler, opts)
	if source != nil {
		c.source = source.ComponentID()
		c.decode = func(id string, rev uint64, data []byte) (I, error) {
			if rev == 0 {
				var deleted I
				return deleted, nil
			}
			return source.DecodeInstance(id, data)
		}
	}
	return c
}

// define is a consumer with its options, and no source yet.
func define[S any](id string, handler func(ctx *Ctx, c Change[S]) Effect, opts []Option) *Consumer[S] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Consumer[S]{id: id, handler: handler, opts: o}
}

// ID is the consumer's id.
func (c *Consumer[S]) ID() string { return c.id }

// Ctx is a handler's view of its call.
type Ctx struct {
	ctx  context.Context
	deps handlerDeps
}

// handlerDeps is what the runner gives every handler call.
type handlerDeps struct {
	client *components.Client
	timers *timers.Scheduler
}

// Context is the call's context: it ends after the consumer's handler
// timeout (WithHandlerTimeout), when the service shuts down and the wait
// for the handlers runs out, and when the shard is handed over while the
// call waits for another shard's owner, or after the hand-over's wait
// ran out (the change is then handled again, on the new owner).
func (c *Ctx) Context() context.Context { return c.ctx }

// Client is the component client: a handler invokes components through
// it (entities, timed actions, views).
func (c *Ctx) Client() *components.Client { return c.deps.client }

// Timers is the service's timer scheduler: a handler creates, reads and
// deletes timers through it (Create, CreateRecurring, Delete). A change
// may be handled more than once: create timers under a name derived from
// the change (the entity id and revision), so that a replay replaces the
// timer rather than adding one. Nil when the runner was made without
// Config.Timers.
func (c *Ctx) Timers() *timers.Scheduler { return c.deps.timers }

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
// wait behind it and are handled in order once it succeeds (or, with
// WithCoalescing, replace it: the retry handles the latest state).
func (c *Ctx) Error(format string, args ...any) Effect {
	return Effect{kind: effectError, message: fmt.Sprintf(format, args...)}
}

// Start adds the consumer to r, the service's consumers: it consumes once
// r is started, on the shards this instance serves. It fails when the
// service's store keeps no change log, or when a consumer with the same
// id was added already.
func (c *Consumer[S]) Start(r *Runner) (*Running, error) {
	if c.id == "" || c.decode == nil || c.handler == nil {
		return nil, errors.New("consumers: Define needs an id, an entity type (DefineWorkflow a workflow type) and a handler")
	}
	return r.add(&consumer{id: c.id, entityType: c.source, maxRetries: c.opts.maxRetries,
		coalesce: c.opts.coalesce, timeout: c.opts.timeout, handle: c.handle})
}

// handle decodes a change and runs the handler on it; a panic is an
// error.
func (c *Consumer[S]) handle(ctx context.Context, deps handlerDeps, ch change) (ignored bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("consumer %s: the handler panicked: %v", c.id, p)
		}
	}()
	rev := ch.Revision
	if ch.Deleted {
		rev = 0
	}
	state, err := c.decode(ch.EntityID, rev, ch.Data)
	if err != nil {
		return false, fmt.Errorf("consumer %s: %w", c.id, err)
	}
	e := c.handler(&Ctx{ctx: ctx, deps: deps}, Change[S]{EntityID: ch.EntityID, State: state, Revision: ch.Revision, Deleted: ch.Deleted, At: ch.At})
	return e.result(c.id)
}

// result is what the effect of consumer id's handler means to the runner.
func (e Effect) result(id string) (ignored bool, err error) {
	switch e.kind {
	case effectDone:
		return false, nil
	case effectIgnore:
		return true, nil
	case effectError:
		return false, errors.New(e.message)
	}
	return false, fmt.Errorf("consumer %s returned no effect (the zero Effect)", id)
}

// consumer is a consumer with its state type erased, as the runner keeps
// it.
type consumer struct {
	id         string
	entityType string
	maxRetries int
	coalesce   bool
	timeout    time.Duration // zero: the runner's
	handle     func(ctx context.Context, deps handlerDeps, ch change) (ignored bool, err error)
}

// handlerTimeout is c's handler timeout, or def.
func (c *consumer) handlerTimeout(def time.Duration) time.Duration { return cmp.Or(c.timeout, def) }

// change is an entities.Change as the runner handles it.
type change = entities.Change
