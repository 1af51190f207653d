package eventsourced

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/entityrun"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
)

// envelope is one command for an entity actor.
type envelope[S any] = entityrun.Envelope[call[S], effect[S]]

// outcome is a command's answer.
type outcome = entityrun.Outcome

// actor is one entity id: the runtime's sharding runs one per id, so its
// commands are handled one at a time. It loads the state on its first
// command (the latest snapshot and the events after it) and keeps it,
// with the journal's seq, until it is passivated. Each command's handler
// gets a state of its own: a copy when the state type is flat, else a
// decode of the state as encoded after the last write.
type actor[S any] struct {
	r       *Running[S]
	id      string
	state   S
	data    []byte // state encoded, when the type is not flat
	seq     uint64
	deleted bool
	snapSeq uint64    // the stored snapshot's seq (0: none)
	snapAt  time.Time // and when it was taken
	trimmed uint64    // events up to it are known dropped
	loaded  bool
	fence   entities.Fence
	queued  entityrun.Queue[call[S], effect[S]] // Receive's
}

// Receive runs a command, and with it the commands queued behind it when
// the entity runs on its shard's owner (see runQueued).
func (a *actor[S]) Receive(ctx *runtime.Context[envelope[S]], env envelope[S]) {
	if a.r.fenced && a.queued.Take(ctx, env, a.runQueued) {
		return
	}
	a.receive(env)
}

// receive runs one command and replies.
func (a *actor[S]) receive(env envelope[S]) { entityrun.Answer(env, a.handle) }

// op names a command on the entity in errors.
func (a *actor[S]) op(env envelope[S]) string {
	return entityrun.Op(a.r.t.ComponentID(), env.Cmd.Name, a.id)
}

// handle runs the command and carries out its effect: events are written
// before the reply, and a write that fails is the caller's error and
// leaves the state as it was. Without a Host.Cluster another instance may
// have written since the state was loaded: a write then conflicts, and a
// reply that writes nothing checks the journal's seq first; either way
// the entity reloads and runs the command again. With one, the entity is
// this instance's alone while it serves the shard: a reply is answered
// from memory, writes go under the shard's fence, and when the fence
// moved the command fails with entities.ErrMoved, to be routed again.
func (a *actor[S]) handle(env envelope[S]) (any, error) {
	ctx, r := env.Ctx, a.r
	for conflicts := 0; ; conflicts++ {
		if conflicts > r.host.MaxConflicts {
			return nil, fmt.Errorf("%s: %d write conflicts in a row: %w", a.op(env), conflicts-1, entities.ErrConflict)
		}
		if err := a.ready(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", a.op(env), err)
		}
		if a.deleted {
			return nil, deletedErr(a.r.t.ComponentID(), a.id, a.seq)
		}
		eff, err := a.run(env)
		if err != nil {
			return nil, err
		}
		switch eff.kind {
		case replyOnly, failWith:
			if !r.fenced {
				fresh, err := a.fresh(ctx)
				if err != nil {
					return nil, fmt.Errorf("%s: check the state is fresh: %w", a.op(env), err)
				}
				if !fresh {
					a.loaded = false
					continue
				}
			}
			if eff.kind == failWith {
				return nil, eff.refusal
			}
			return eff.value, nil
		}
		w := pending[S]{state: a.copy()}
		reply, err := a.add(&w, env, eff)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.op(env), err)
		}
		err = a.write(ctx, &w)
		if ok, first, firstErr := entities.Replayed(err); ok {
			a.loaded = false // written by a first attempt this entity may not hold
			return first, firstErr
		}
		switch {
		case errors.Is(err, entities.ErrConflict), errors.Is(err, entities.ErrJournalDeleted):
			a.loaded = false
			continue
		case errors.Is(err, entities.ErrFenced):
			a.drop()
			return nil, fmt.Errorf("%s: %w: %w", a.op(env), entities.ErrMoved, err)
		case err != nil:
			a.loaded = false // whether it was written is unknown: the next command loads
			return nil, fmt.Errorf("%s: %w", a.op(env), err)
		}
		return reply, nil
	}
}

// ready loads the entity when it must: on its first command, and with a
// cluster when the shard's fence moved since it was loaded (another owner
// may have written). It fails with ErrMoved when this instance no longer
// serves the shard.
func (a *actor[S]) ready(ctx context.Context) error {
	fence, serving := a.serving()
	if !serving {
		a.drop()
		return entities.ErrMoved
	}
	if a.loaded && fence != a.fence {
		a.loaded = false
	}
	if !a.loaded {
		if err := a.load(ctx); err != nil {
			return err
		}
		a.fence = fence
	}
	return nil
}

// deletedErr refuses a command on entity id of componentID, deleted
// after event seq.
func deletedErr(componentID, id string, seq uint64) error {
	return &components.CommandError{Kind: components.NotFound,
		Message: fmt.Sprintf("%s %q was deleted (after event %d)", componentID, id, seq)}
}

// run runs env's command on a state of its own; a refusal comes back as
// the effect's.
func (a *actor[S]) run(env envelope[S]) (effect[S], error) {
	return a.runOn(env, a.copy())
}

// runOn runs env's command on state.
func (a *actor[S]) runOn(env envelope[S], state S) (effect[S], error) {
	return env.Cmd.Run(call[S]{ctx: env.Ctx, client: a.r.host.Client, entityID: a.id, state: state}, env.Arg)
}

// copy is a state of its own, sharing nothing with the entity's.
func (a *actor[S]) copy() S {
	if a.r.t.flat {
		return a.state
	}
	s, err := a.r.t.decodeState(a.id, a.data)
	if err != nil {
		// data was encoded from a state of this type: it decodes.
		panic(fmt.Sprintf("eventsourced %s %q: %v", a.r.t.ComponentID(), a.id, err))
	}
	return s
}

// serving is the fence of the entity's shard and whether this instance
// serves it now; without a Host.Cluster, always (under no fence).
func (a *actor[S]) serving() (entities.Fence, bool) {
	if a.r.host.Cluster == nil {
		return entities.Fence{}, true
	}
	return a.r.host.Cluster.Fence(a.r.t.ComponentID(), a.id)
}

// drop forgets the state: the shard is no longer this instance's.
func (a *actor[S]) drop() {
	var zero S
	a.state, a.data, a.seq, a.deleted, a.loaded, a.fence = zero, nil, 0, false, false, entities.Fence{}
}

// fresh says whether the journal is still at the seq the entity holds.
func (a *actor[S]) fresh(ctx context.Context) (bool, error) {
	seq, deleted, err := a.r.journal.JournalSeq(ctx, a.r.t.ComponentID(), a.id)
	return err == nil && seq == a.seq && deleted == a.deleted, err
}

// load reads the latest snapshot and the events after it, and replays
// them. An event the type does not know fails the load (ErrUnknownEvent).
func (a *actor[S]) load(ctx context.Context) (err error) {
	t := a.r.t
	ctx, span := tracing.StartStore(ctx, a.r.tracer(), "entity load", t.ComponentID(), a.id)
	defer func() { tracing.End(span, components.ErrorType(err)) }()
	head, events, err := a.r.journal.ReadJournal(ctx, t.ComponentID(), a.id)
	if err != nil {
		return fmt.Errorf("load the journal: %w", err)
	}
	state, seq := t.empty(a.id), uint64(0)
	var snapAt time.Time
	if head.Snapshot != nil {
		if state, err = t.decodeState(a.id, head.Snapshot.Data); err != nil {
			return fmt.Errorf("snapshot at event %d: %w", head.Snapshot.Seq, err)
		}
		seq, snapAt = head.Snapshot.Seq, head.Snapshot.At
	}
	snapSeq := seq
	if state, seq, err = t.replay(a.id, state, seq, events); err != nil {
		return err
	}
	if seq != head.Seq {
		return fmt.Errorf("the journal of %s %q ends at event %d, its head says %d", t.ComponentID(), a.id, seq, head.Seq)
	}
	if err := a.keep(state); err != nil {
		return err
	}
	a.seq, a.deleted, a.snapSeq, a.snapAt, a.trimmed, a.loaded = seq, head.Deleted, snapSeq, snapAt, 0, true
	return nil
}

// keep holds state as the entity's (encoded, when the type is not flat).
func (a *actor[S]) keep(state S) error {
	if !a.r.t.flat {
		data, err := json.Marshal(state)
		if err != nil {
			return fmt.Errorf("encode the state: %w", err)
		}
		a.data = data
	}
	a.state = state
	return nil
}
