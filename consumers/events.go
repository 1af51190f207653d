package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// EventSource is an event-sourced entity type (eventsourced.Type): its
// component id, and how it reads an event from its journal name and data
// (upcasters included).
type EventSource interface {
	ComponentID() string
	DecodeEvent(name string, data []byte) (any, error)
}

// Event is one event of an event-sourced entity as a handler gets it, or
// the entity's deletion.
type Event struct {
	EntityID string
	// Seq is the event's number in the entity's journal (for a deletion,
	// the last event's): it grows by one from event to event.
	Seq uint64
	// Name is the event's name in the journal; Event the event, as one of
	// the entity type's event types. Both are empty for a deletion.
	Name    string
	Event   any
	Deleted bool
	// At is when the event was recorded (the store's clock), about.
	At time.Time
}

// EventConsumer is the definition of a consumer of an event-sourced
// entity type's events.
type EventConsumer struct {
	id      string
	source  EventSource
	handler func(ctx *Ctx, e Event) Effect
	opts    options
}

// DefineEvents defines a consumer of source's events with a stable id:
// the handler gets every event of every entity of the type, at least
// once, in order per entity (and each entity's deletion), as the
// consumers of key-value entities get their changes. WithCoalescing does
// not apply (each event is handled). A consumer that falls behind the
// change log's bound (entities.DefaultChangeLogLimit changes a shard)
// misses the events trimmed meanwhile: an event-sourced entity has no
// current state to catch up from; read its journal for them.
func DefineEvents(id string, source EventSource, handler func(ctx *Ctx, e Event) Effect, opts ...Option) *EventConsumer {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	o.coalesce = false
	return &EventConsumer{id: id, source: source, handler: handler, opts: o}
}

// ID is the consumer's id.
func (c *EventConsumer) ID() string { return c.id }

// Start adds the consumer to r, as Consumer.Start does.
func (c *EventConsumer) Start(r *Runner) (*Running, error) {
	if c.id == "" || c.source == nil || c.handler == nil {
		return nil, errors.New("consumers: DefineEvents needs an id, an event source and a handler")
	}
	return r.add(&consumer{id: c.id, entityType: c.source.ComponentID(), maxRetries: c.opts.maxRetries,
		timeout: c.opts.timeout, handle: c.handle})
}

// handle decodes a change of the journal and runs the handler on it; a
// panic is an error. A state read to catch up (Seq 0, not an event) is
// ignored.
func (c *EventConsumer) handle(ctx context.Context, deps handlerDeps, ch change) (ignored bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("consumer %s: the handler panicked: %v", c.id, p)
		}
	}()
	e := Event{EntityID: ch.EntityID, Seq: ch.Revision, Deleted: ch.Deleted, At: ch.At}
	if !ch.Deleted {
		var env struct {
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(ch.Data, &env); err != nil || env.Name == "" {
			return true, nil // not an event: a state read to catch up
		}
		if e.Event, err = c.source.DecodeEvent(env.Name, env.Data); err != nil {
			return false, fmt.Errorf("consumer %s: event %d of %q: %w", c.id, ch.Revision, ch.EntityID, err)
		}
		e.Name = env.Name
	}
	return c.handler(&Ctx{ctx: ctx, deps: deps}, e).result(c.id)
}
