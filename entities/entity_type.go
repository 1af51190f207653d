package entities

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/entityhook"
)

// Type is the definition of a key-value entity: its component id, its empty
// state and its commands. It holds no running state, so one definition can
// be started in several services (or test servers) at once.
type Type[S any] struct {
	commands *components.MethodSet[*call[S], effect[S]]
	empty    func(entityID string) S
	// flat: S holds no pointer, slice, map, interface, channel or function,
	// so a plain assignment copies all of it and shares nothing.
	flat bool
	// keepDecoded: see KeepDecoded.
	keepDecoded bool
	// expectNew: see entityhook.ExpectNew.
	expectNew bool
}

func init() {
	entityhook.ExpectNew = func(t any) { t.(interface{ setExpectNew() }).setExpectNew() }
}

// setExpectNew is entityhook.ExpectNew for t.
func (t *Type[S]) setExpectNew() { t.expectNew = true }

// KeepDecoded declares that t's command handlers change nothing in place
// in the state they are given — no element of its slices (an append to
// one with room writes one), no entry of its maps, nothing its pointers
// point to — but build any change anew, and that S survives its JSON
// encoding unchanged (exported fields only). Its entities then decode their state once, at the load,
// hold the state each write stored as the handler returned it, and give
// every command a copy of it: no decode per command. Replies may share
// parts of the state with it. Call it before Start; it returns t.
func (t *Type[S]) KeepDecoded() *Type[S] {
	t.keepDecoded = true
	return t
}

// holdsDecoded says whether t's entities hold their state decoded and
// hand copies of it to the commands (flat, or KeepDecoded).
func (t *Type[S]) holdsDecoded() bool { return t.flat || t.keepDecoded }

// Define defines a key-value entity with a stable component id and the
// empty state of an entity that has never been written (or was deleted).
func Define[S any](componentID string, empty func(entityID string) S) *Type[S] {
	return &Type[S]{
		commands: components.NewMethodSet[*call[S], effect[S]](components.KindKeyValueEntity, componentID),
		empty:    empty,
		flat:     IsFlat(reflect.TypeFor[S]()),
	}
}

// IsFlat reports whether a value of t shares nothing when it is assigned:
// it holds no pointer, slice, map, interface, channel or function, however
// deep in its structs and arrays (strings are immutable).
func IsFlat(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		for f := range t.Fields() {
			if !IsFlat(f.Type) {
				return false
			}
		}
		return true
	case reflect.Array:
		return IsFlat(t.Elem())
	case reflect.Pointer, reflect.UnsafePointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
		return false
	}
	return true
}

// ComponentID is the entity's component id.
func (t *Type[S]) ComponentID() string { return t.commands.ComponentID() }

// Decode is the state stored as data at revision rev of entity entityID:
// what a consumer of the entity's changes (package consumers) gets. Revision
// 0 is the empty state.
func (t *Type[S]) Decode(entityID string, rev uint64, data []byte) (S, error) {
	return t.decode(entityID, rev, data)
}

// decode is the state stored as data at revision rev; revision 0 is
// absent, the empty state. Each call returns a value of its own that
// shares no slice or map with another, so a handler can change the one it
// is given without changing what the entity holds.
func (t *Type[S]) decode(entityID string, rev uint64, data []byte) (S, error) {
	if rev == 0 {
		return t.empty(entityID), nil // not the variable below, which Unmarshal moves to the heap
	}
	state := t.empty(entityID)
	if err := json.Unmarshal(data, &state); err != nil {
		return state, fmt.Errorf("decode the stored state (revision %d): %w", rev, err)
	}
	return state, nil
}

// StateAppender is a state type that writes its own JSON: an entity type
// whose *S has it stores the bytes AppendJSON appends, rather than
// json.Marshal's, on every write (encoding/json's reflection is a large
// part of a write's cost for a big state). They must be JSON that
// json.Unmarshal reads back into the same state; the bytes json.Marshal
// writes for it are best (stores and consumers see the same JSON either
// way).
type StateAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// encode is the stored form of *state: its AppendJSON, else json.Marshal.
func encode[S any](state *S) ([]byte, error) {
	if a, ok := any(state).(StateAppender); ok {
		return a.AppendJSON(nil)
	}
	return json.Marshal(state)
}

// command is one command, with its argument type erased.
type command[S any] = components.Method[*call[S], effect[S]]

// call is what a command's handler is run with, besides its argument.
type call[S any] struct {
	ctx      context.Context
	client   *components.Client
	entityID string
	state    S
}

// effect is an Effect with its reply boxed.
type effect[S any] struct {
	kind    effectKind
	state   S
	reply   any
	refusal components.ErrorKind
	message string
}

// Command adds a command named name (stable: it is stored in deferred
// calls) to the entity t and returns its typed handle. A second command
// with the same name panics: definitions are package-level and a clash is
// a programming error found at start-up.
func Command[S, A, R any](t *Type[S], name string, handler func(ctx *Ctx[S, R], state S, arg A) Effect[S, R]) components.EntityMethod[A, R] {
	id := t.ComponentID()
	t.commands.Add(components.NewMethod(id, name, func(c *call[S], a A) (effect[S], error) {
		e := handler(&Ctx[S, R]{ctx: c.ctx, entityID: c.entityID, client: c.client}, c.state, a)
		if e.kind == 0 {
			return effect[S]{}, fmt.Errorf("%s.%s on %q returned no effect (the zero Effect)", id, name, c.entityID)
		}
		return effect[S]{kind: e.kind, state: e.state, reply: e.reply, refusal: e.refusal, message: e.message}, nil
	}))
	return components.NewEntityMethod[A, R](id, name)
}
