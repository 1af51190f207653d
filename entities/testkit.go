package entities

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/components"
)

// Outcome is what one command did, as the unit test kit reports it.
type Outcome[S, R any] struct {
	Reply   R    // the reply, unless Err is set
	State   S    // the state after the command: the given one unless Updated or Deleted
	Updated bool // the effect was UpdateState
	Deleted bool // the effect was DeleteEntity (State is then the empty state)
	// Err is the command's error(message) as a *components.CommandError, or
	// a failure such as a panic in the handler.
	Err error
}

// Try runs one command of t against a given state, with no actor, store or
// HTTP: the unit test kit. The handler gets a copy of state made as the
// entity makes it (through JSON), so Try never changes its input, and a
// state that cannot be encoded fails as it would in the entity. client is what the handler's Ctx.Client returns
// (nil when the handler calls no other component).
//
//	out := entities.Try(Counters, Increase, "c-1", Counter{Value: 1}, 2, nil)
//	// out.Updated, out.State.Value == 3, out.Reply.Value == 3
func Try[S, A, R any](t *Type[S], m components.EntityMethod[A, R], entityID string, state S, arg A, client *components.Client) Outcome[S, R] {
	out := Outcome[S, R]{State: state}
	cmd, err := t.commands.Lookup(m.Name())
	if err != nil {
		out.Err = err
		return out
	}
	own, err := copyState(t, entityID, state)
	if err != nil {
		out.Err = err
		return out
	}
	eff, err := cmd.Run(&call[S]{ctx: context.Background(), client: client, entityID: entityID, state: own}, arg)
	if err != nil {
		out.Err = err
		return out
	}
	switch eff.kind {
	case failWith:
		out.Err = &components.CommandError{Kind: eff.refusal, Message: eff.message}
		return out
	case updateThenReply:
		out.State, out.Updated = eff.state, true
	case deleteThenReply:
		out.State, out.Deleted = t.empty(entityID), true
	}
	if eff.reply != nil {
		out.Reply = eff.reply.(R)
	}
	return out
}

// copyState is state as the entity would hand it to a handler after
// storing it: encoded, then decoded over t's empty state.
func copyState[S any](t *Type[S], entityID string, state S) (S, error) {
	data, err := encode(&state)
	if err != nil {
		return state, fmt.Errorf("encode the state: %w", err)
	}
	// Revision 1 stands for any stored revision: decode only tells absent
	// (0) from present.
	return t.decode(entityID, 1, data)
}

// TestKit runs commands of one entity one after another, with no actor,
// store or HTTP, keeping the state between them as the entity would: the
// stateful unit test kit. It is not safe for concurrent use.
//
//	kit := entities.NewTestKit(Carts, "c-1", nil)
//	entities.Exec(kit, AddItem, Item{SKU: "apple"})
//	out := entities.Exec(kit, Checkout, components.Done{})
//	// out.Err, kit.State()
type TestKit[S any] struct {
	t      *Type[S]
	id     string
	state  S
	client *components.Client
}

// NewTestKit starts entity entityID of t at its empty state. client is
// what the handlers' Ctx.Client returns (nil when they call no other
// component).
func NewTestKit[S any](t *Type[S], entityID string, client *components.Client) *TestKit[S] {
	return &TestKit[S]{t: t, id: entityID, state: t.empty(entityID), client: client}
}

// State is the entity's state after the commands run so far.
func (k *TestKit[S]) State() S { return k.state }

// SetState replaces the state, as if it had been stored so.
func (k *TestKit[S]) SetState(s S) { k.state = s }

// Exec runs command m on the kit's entity, as Try does, and keeps the
// state it leaves: a refused or failed command leaves it as it was.
func Exec[S, A, R any](k *TestKit[S], m components.EntityMethod[A, R], arg A) Outcome[S, R] {
	out := Try(k.t, m, k.id, k.state, arg, k.client)
	if out.Err == nil {
		k.state = out.State
	}
	return out
}
