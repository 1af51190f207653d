package eventsourced

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/trellis-go/trellis/entities"
)

// runQueued runs commands that were queued together, in order: one at a
// time until the entity is loaded, not deleted and serves its shard under
// the fence it was loaded with; from then on, the rest as a batch.
func (a *actor[S]) runQueued(envs []envelope[S]) {
	for i, env := range envs {
		if f, serving := a.serving(); a.loaded && !a.deleted && serving && f == a.fence {
			a.runBatch(envs[i:])
			return
		}
		a.receive(env)
	}
}

// held is a reply that waits for the batch's write.
type held[S any] struct {
	env envelope[S]
	out outcome
}

// runBatch runs commands, each on the state the ones before it left, and
// appends the events of all of them in one write. A reply after an event
// waits for that write, so that none is answered from a state that is not
// stored; one before any event is given at once. When the write
// conflicts nothing was written, and the held commands run again one at a
// time; when the fence refuses it, each fails with ErrMoved (none ran),
// to be routed again; when it fails otherwise, each held command gets the
// failure. A delete ends the batch: it goes in the write, and the
// commands after it run alone (and are refused).
func (a *actor[S]) runBatch(envs []envelope[S]) {
	w := pending[S]{state: a.copy()}
	var replies []held[S]
	give := func(env envelope[S], out outcome) {
		if len(w.events) == 0 && !w.delete {
			env.Reply <- out
			return
		}
		replies = append(replies, held[S]{env: env, out: out})
	}
	rest := envs[:0:0]
	for i, env := range envs {
		if err := env.Ctx.Err(); err != nil {
			env.Reply <- outcome{Err: err}
			continue
		}
		state := w.state
		if !a.r.t.flat {
			state = a.copyOf(w.state)
		}
		eff, err := a.runOn(env, state)
		switch {
		case err != nil:
			give(env, outcome{Err: err})
		case eff.kind == replyOnly:
			give(env, outcome{Value: eff.value})
		case eff.kind == failWith:
			give(env, outcome{Err: eff.refusal})
		default:
			reply, err := a.add(&w, env, eff)
			if err != nil {
				give(env, outcome{Err: fmt.Errorf("%s: %w", a.op(env), err)})
				continue
			}
			replies = append(replies, held[S]{env: env, out: outcome{Value: reply}})
			if eff.kind == deleteThenReply {
				rest = envs[i+1:]
			}
		}
		if w.delete {
			break
		}
	}
	a.flush(&w, replies)
	for _, env := range rest {
		a.receive(env)
	}
}

// flush writes w and gives the held replies (see runBatch).
func (a *actor[S]) flush(w *pending[S], replies []held[S]) {
	if len(replies) == 0 {
		return
	}
	ctx, cancel := entities.WriteContext(replies, func(h held[S]) context.Context { return h.env.Ctx })
	err := a.write(ctx, w)
	cancel()
	switch {
	case err == nil:
		for _, h := range replies {
			h.env.Reply <- h.out
		}
	case errors.Is(err, entities.ErrConflict), errors.Is(err, entities.ErrJournalDeleted), errors.As(err, new(*entities.AlreadyAppliedError)):
		// Nothing was written: each runs again alone, and a command
		// applied already gets its first answer.
		a.loaded = false
		for _, h := range replies {
			a.receive(h.env)
		}
	case errors.Is(err, entities.ErrFenced):
		a.drop()
		for _, h := range replies {
			h.env.Reply <- outcome{Err: fmt.Errorf("%s: %w: %w", a.op(h.env), entities.ErrMoved, err)}
		}
	default:
		a.loaded = false
		for _, h := range replies {
			h.env.Reply <- outcome{Err: fmt.Errorf("%s: %w", a.op(h.env), err)}
		}
	}
}

// copyOf is a copy of state, through its encoding.
func (a *actor[S]) copyOf(state S) S {
	if a.r.t.flat {
		return state
	}
	data, err := json.Marshal(state)
	if err == nil {
		if s, err := a.r.t.decodeState(a.id, data); err == nil {
			return s
		}
	}
	return state
}
