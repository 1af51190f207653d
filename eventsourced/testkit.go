package eventsourced

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trellis-go/trellis/components"
)

// Outcome is what one command did, as the unit test kit reports it.
type Outcome[S, R any] struct {
	Reply R // the reply, unless Err is set
	// Events are the events the command persisted, in order (none for a
	// reply or a refusal), as apply gets them back from the journal.
	Events []any
	// State is the state after the events (the given one when there are
	// none).
	State   S
	Deleted bool // the effect was DeleteEntity
	// Err is the command's refusal (a *components.CommandError) or a
	// failure: a panic, an event of a type the entity does not define, an
	// event over the size limit.
	Err error
}

// Try runs one command of t against a given state, with no actor, store or
// HTTP: the unit test kit. Each event goes through its encoding in the
// journal (encoded, size-checked, decoded by its name) before apply gets
// it, and the handler gets a copy of state made through JSON, so Try never
// changes its input. client is what the handler's Ctx.Client returns (nil
// when the handler calls no other component).
//
//	out := eventsourced.Try(Wallets, Deposit, "w-1", Wallet{}, 5, nil)
//	// out.Events == []any{Deposited{Amount: 5}}, out.State.Balance == 5
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
	eff, err := cmd.Run(call[S]{ctx: context.Background(), client: client, entityID: entityID, state: own}, arg)
	if err != nil {
		out.Err = err
		return out
	}
	switch eff.kind {
	case failWith:
		out.Err = eff.refusal
		return out
	case replyOnly:
		out.Reply, _ = eff.value.(R)
		return out
	}
	after, err := copyState(t, entityID, state)
	if err != nil {
		out.Err = err
		return out
	}
	for _, e := range eff.events {
		name, data, err := t.encodeEvent(e)
		if err != nil {
			out.Err = err
			return out
		}
		stored, err := t.decodeEvent(name, data)
		if err != nil {
			out.Err = err
			return out
		}
		out.Events = append(out.Events, stored)
	}
	for _, e := range out.Events {
		after = t.apply(after, e)
	}
	out.State = after
	if eff.kind == deleteThenReply {
		out.Deleted = true
		out.Reply, _ = eff.value.(R)
		return out
	}
	replyState, err := copyState(t, entityID, after)
	if err != nil {
		out.Err = err
		return out
	}
	out.Reply, _ = eff.reply(replyState).(R)
	return out
}

// copyState is state as the entity holds it: encoded, then decoded over
// t's empty state.
func copyState[S any](t *Type[S], entityID string, state S) (S, error) {
	data, err := json.Marshal(state)
	if err != nil {
		return state, fmt.Errorf("encode the state: %w", err)
	}
	return t.decodeState(entityID, data)
}

// TestKit runs commands of one entity one after another, with no actor,
// store or HTTP, keeping the state and the journal between them as the
// entity would: the stateful unit test kit. A command on an entity it
// deleted is refused as the entity refuses it. It is not safe for
// concurrent use.
//
//	kit := eventsourced.NewTestKit(Wallets, "w-1", nil)
//	eventsourced.Exec(kit, Deposit, 5)
//	out := eventsourced.Exec(kit, Withdraw, 2)
//	// out.Events, kit.State(), kit.Events()
type TestKit[S any] struct {
	t       *Type[S]
	id      string
	state   S
	events  []any
	deleted bool
	client  *components.Client
}

// NewTestKit starts entity entityID of t at its empty state, with an
// empty journal. client is what the handlers' Ctx.Client returns.
func NewTestKit[S any](t *Type[S], entityID string, client *components.Client) *TestKit[S] {
	return &TestKit[S]{t: t, id: entityID, state: t.empty(entityID), client: client}
}

// State is the entity's state after the commands run so far.
func (k *TestKit[S]) State() S { return k.state }

// Events are all the events the commands so far persisted, in order.
func (k *TestKit[S]) Events() []any { return k.events }

// Deleted says whether a command deleted the entity.
func (k *TestKit[S]) Deleted() bool { return k.deleted }

// Given applies events to the kit's state and journal, as if they had
// been persisted before: the history a test starts from.
func (k *TestKit[S]) Given(events ...any) {
	for _, e := range events {
		k.state = k.t.apply(k.state, e)
	}
	k.events = append(k.events, events...)
}

// Exec runs command m on the kit's entity, as Try does, and keeps the
// state and the events it leaves: a refused or failed command leaves
// them as they were.
func Exec[S, A, R any](k *TestKit[S], m components.EntityMethod[A, R], arg A) Outcome[S, R] {
	if k.deleted {
		return Outcome[S, R]{State: k.state, Err: deletedErr(k.t.ComponentID(), k.id, uint64(len(k.events)))}
	}
	out := Try(k.t, m, k.id, k.state, arg, k.client)
	if out.Err == nil {
		k.state, k.deleted = out.State, out.Deleted
		k.events = append(k.events, out.Events...)
	}
	return out
}
