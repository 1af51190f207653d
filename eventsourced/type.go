package eventsourced

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Type is the definition of an event-sourced entity: its component id, its
// empty state, its events (a closed set of Go types, each with a stable
// name in the journal), how an event changes the state (apply), its
// upcasters and its commands. It holds no running state, so one
// definition can be started in several services (or test servers) at
// once. Events, upcasters and commands are added before the type is
// started (package-level definitions are).
type Type[S any] struct {
	commands  *components.MethodSet[call[S], effect[S]]
	empty     func(entityID string) S
	apply     func(state S, event any) S
	flat      bool
	byName    map[string]func(data []byte) (any, error)
	byType    map[reflect.Type]string
	upcasters map[string]func(data json.RawMessage) (any, error)
	opts      options
}

// Option configures an event-sourced entity type.
type Option func(*options)

type options struct {
	snapshotEvery int
	maxEventSize  int
	retention     time.Duration
}

// DefaultSnapshotEvery is how many events an entity's snapshots are apart
// unless SnapshotEvery says otherwise.
const DefaultSnapshotEvery = 100

// DefaultMaxEventSize bounds an event, encoded, unless MaxEventSize says
// otherwise: 256 KiB.
const DefaultMaxEventSize = 256 << 10

// SnapshotEvery makes the entity store a snapshot of its state each time
// its journal passes a multiple of n events, so that loading it reads the
// latest snapshot and at most about n events after it, however long its
// journal. n <= 0 takes no snapshots (every load replays the journal).
func SnapshotEvery(n int) Option { return func(o *options) { o.snapshotEvery = n } }

// MaxEventSize bounds one event, encoded, in bytes: a command that
// persists a larger one is refused (components.Invalid) and writes
// nothing.
func MaxEventSize(bytes int) Option { return func(o *options) { o.maxEventSize = bytes } }

// DropCoveredAfter sets the journal's retention: the events a snapshot
// covers are dropped once that snapshot is older than d (by the entity's
// clock), at the entity's next write or by the next sweep of a [Sweeper]
// (a service runs one), whichever comes first. The journal is then no longer whole:
// exports and the admin API start after the snapshot. Without it (the
// default) the journal is kept whole.
func DropCoveredAfter(d time.Duration) Option { return func(o *options) { o.retention = d } }

// Define defines an event-sourced entity with a stable component id, the
// empty state of an entity with no event, and apply, which returns the
// state after an event (one of the types registered with [Event], or what
// an upcaster returns). apply must be a pure function: it runs again each
// time the entity is loaded.
func Define[S any](componentID string, empty func(entityID string) S, apply func(state S, event any) S, opts ...Option) *Type[S] {
	o := options{snapshotEvery: DefaultSnapshotEvery, maxEventSize: DefaultMaxEventSize}
	for _, opt := range opts {
		opt(&o)
	}
	return &Type[S]{
		commands:  components.NewMethodSet[call[S], effect[S]](components.KindEventSourcedEntity, componentID),
		empty:     empty,
		apply:     apply,
		flat:      entities.IsFlat(reflect.TypeFor[S]()),
		byName:    make(map[string]func([]byte) (any, error)),
		byType:    make(map[reflect.Type]string),
		upcasters: make(map[string]func(json.RawMessage) (any, error)),
		opts:      o,
	}
}

// ComponentID is the entity's component id.
func (t *Type[S]) ComponentID() string { return t.commands.ComponentID() }

// Event adds the event type E to t under name, its stable name in the
// journal (letters, digits, '.', '_' and '-'): a command persists values
// of E, and apply gets them back. A name or a Go type added twice, or a
// bad name, panics: definitions are package-level and a clash is a
// programming error found at start-up.
func Event[E, S any](t *Type[S], name string) {
	t.checkNew(name)
	et := reflect.TypeFor[E]()
	if prev, dup := t.byType[et]; dup {
		panic(fmt.Sprintf("eventsourced %s: event type %v is added twice (as %q and %q)", t.ComponentID(), et, prev, name))
	}
	t.byType[et] = name
	t.byName[name] = func(data []byte) (any, error) {
		var e E
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, err
		}
		return e, nil
	}
}

// Upcast makes t read the events stored under name, a name no event type
// of t has any more (an event whose shape changed gets a new name, say
// "deposited.v2", and the old one an upcaster), through fn: it returns
// the event as one of t's event types. A name added twice panics.
func Upcast[S any](t *Type[S], name string, fn func(data json.RawMessage) (any, error)) {
	t.checkNew(name)
	t.upcasters[name] = fn
}

// checkNew panics unless name is a valid event name that t does not use.
func (t *Type[S]) checkNew(name string) {
	if !entities.ValidEventName(name) {
		panic(fmt.Sprintf("eventsourced %s: %q cannot name an event (1 to 100 letters, digits, '.', '_' or '-')", t.ComponentID(), name))
	}
	_, event := t.byName[name]
	_, upcast := t.upcasters[name]
	if event || upcast {
		panic(fmt.Sprintf("eventsourced %s: the event name %q is added twice", t.ComponentID(), name))
	}
}

// ErrUnknownEvent is wrapped by a load that meets an event name the entity
// type defines neither as an event nor as an upcaster: the entity does
// not load (its commands fail) until the code knows the name again.
var ErrUnknownEvent = errors.New("unknown event name")

// ErrUnregisteredEvent is wrapped by a command that persists a value of a
// Go type that was not added with Event: nothing is written.
var ErrUnregisteredEvent = errors.New("not an event type of the entity")

// DecodeEvent is the event stored in the journal as data under name: one
// of t's event types, read directly or through its upcaster. It fails
// with ErrUnknownEvent for a name t does not know. Consumers of t's
// events (consumers.DefineEvents) read them with it.
func (t *Type[S]) DecodeEvent(name string, data []byte) (any, error) {
	return t.decodeEvent(name, data)
}

// decodeEvent is the event stored as data under name.
func (t *Type[S]) decodeEvent(name string, data []byte) (any, error) {
	if decode, ok := t.byName[name]; ok {
		e, err := decode(data)
		if err != nil {
			return nil, fmt.Errorf("decode event %q: %w", name, err)
		}
		return e, nil
	}
	if up, ok := t.upcasters[name]; ok {
		e, err := up(data)
		if err != nil {
			return nil, fmt.Errorf("upcast event %q: %w", name, err)
		}
		if _, ok := t.byType[reflect.TypeOf(e)]; !ok {
			return nil, fmt.Errorf("upcast event %q: it returned a %T: %w", name, e, ErrUnregisteredEvent)
		}
		return e, nil
	}
	return nil, fmt.Errorf("%w %q: %s defines no event type nor upcaster of that name", ErrUnknownEvent, name, t.ComponentID())
}

// encodeEvent is e's name and encoding, checked against the size limit.
func (t *Type[S]) encodeEvent(e any) (string, []byte, error) {
	name, ok := t.byType[reflect.TypeOf(e)]
	if !ok {
		return "", nil, fmt.Errorf("persist a %T: %w %s (add it with eventsourced.Event)", e, ErrUnregisteredEvent, t.ComponentID())
	}
	data, err := json.Marshal(e)
	if err != nil {
		return "", nil, fmt.Errorf("encode event %q: %w", name, err)
	}
	if len(data) > t.opts.maxEventSize {
		return "", nil, &components.CommandError{Kind: components.Invalid,
			Message: fmt.Sprintf("event %q is %d bytes encoded, over the limit of %d bytes", name, len(data), t.opts.maxEventSize)}
	}
	return name, data, nil
}

// decodeState is a state encoded as data, over the empty state.
func (t *Type[S]) decodeState(entityID string, data []byte) (S, error) {
	state := t.empty(entityID)
	if err := json.Unmarshal(data, &state); err != nil {
		return state, fmt.Errorf("decode the state: %w", err)
	}
	return state, nil
}

// replay is the state after events, from state at seq: each event must be
// the next one (no gap) and known.
func (t *Type[S]) replay(entityID string, state S, seq uint64, events []entities.JournalEvent) (S, uint64, error) {
	for _, je := range events {
		if je.Seq != seq+1 {
			return state, seq, fmt.Errorf("the journal of %s %q has event %d after %d: a gap", t.ComponentID(), entityID, je.Seq, seq)
		}
		e, err := t.decodeEvent(je.Name, je.Data)
		if err != nil {
			return state, seq, fmt.Errorf("event %d of %s %q: %w", je.Seq, t.ComponentID(), entityID, err)
		}
		state, seq = t.apply(state, e), je.Seq
	}
	return state, seq, nil
}

// command is one command, with its argument type erased.
type command[S any] = components.Method[call[S], effect[S]]

// call is what a command's handler is run with, besides its argument.
type call[S any] struct {
	ctx      context.Context
	client   *components.Client
	entityID string
	state    S
}

// effect is an Effect with its reply boxed. A persist's reply function
// is kept as the handler gave it (replyFn, a func(S) R) and called
// through replyOf, one function per command: no closure is made per
// command run.
type effect[S any] struct {
	kind    effectKind
	events  []any
	replyFn any
	replyOf func(fn any, state S) any
	value   any // reply, delete
	refusal *components.CommandError
}

// reply is a persist's reply from state, the state after its events.
func (e effect[S]) reply(state S) any { return e.replyOf(e.replyFn, state) }

// Command adds a command named name (stable: it is stored in deferred
// calls) to the entity t and returns its typed handle. A second command
// with the same name panics.
func Command[S, A, R any](t *Type[S], name string, handler func(ctx *Ctx[S, R], state S, arg A) Effect[S, R]) components.EntityMethod[A, R] {
	id := t.ComponentID()
	replyOf := func(fn any, s S) any { return fn.(func(S) R)(s) }
	t.commands.Add(components.NewMethod(id, name, func(c call[S], a A) (effect[S], error) {
		e := handler(&Ctx[S, R]{ctx: c.ctx, entityID: c.entityID, client: c.client}, c.state, a)
		if e.kind == 0 {
			return effect[S]{}, fmt.Errorf("%s.%s on %q returned no effect (the zero Effect)", id, name, c.entityID)
		}
		out := effect[S]{kind: e.kind, events: e.events, value: e.value, refusal: e.refusal}
		if e.reply != nil {
			out.replyFn, out.replyOf = e.reply, replyOf
		}
		return out, nil
	}))
	return components.NewEntityMethod[A, R](id, name)
}
