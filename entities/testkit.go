package entities

import (
	"context"

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
// HTTP: the unit test kit. client is what the handler's Ctx.Client returns
// (nil when the handler calls no other component).
//
//	out := entities.Try(Counters, Increase, "c-1", Counter{Value: 1}, 2, nil)
//	// out.Updated, out.State.Value == 3, out.Reply.Value == 3
func Try[S, A, R any](t *Type[S], m components.EntityMethod[A, R], entityID string, state S, arg A, client *components.Client) Outcome[S, R] {
	out := Outcome[S, R]{State: state}
	cmd, err := t.command(m.Name())
	if err != nil {
		out.Err = err
		return out
	}
	eff, err := cmd.run(context.Background(), client, entityID, state, arg)
	if err != nil {
		out.Err = err
		return out
	}
	switch eff.kind {
	case failWith:
		out.Err = &components.CommandError{Message: eff.message}
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
