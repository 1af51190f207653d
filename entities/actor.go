package entities

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/entityrun"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
)

// envelope is one command for an entity actor.
type envelope[S any] = entityrun.Envelope[*call[S], effect[S]]

// outcome is a command's answer.
type outcome = entityrun.Outcome

// entityActor is one entity id: the runtime's sharding runs one per id, so
// its commands are handled one at a time. It loads the state on its first
// command and keeps it, with its revision, until it is passivated. Each
// command's handler gets a state of its own, so that what it does to it in
// place never reaches the entity unless it updates the state: a fresh
// decode of the state as stored, or, when the state type is flat (a plain
// assignment shares nothing), a copy of the state decoded when it was
// loaded or written, which costs nothing. A type whose handlers change
// nothing in place (Type.KeepDecoded) gets a copy of the state decoded at
// the load, or of the one its last write stored.
type entityActor[S any] struct {
	r      *Running[S]
	id     string
	data   []byte // the stored state; nil when absent (rev 0)
	state  S      // data decoded (or as written), when the type holds it
	rev    uint64
	loaded bool
	// assumed: the state was not read but assumed absent (a type that
	// expects new entities: entityhook.ExpectNew); only a write made on
	// that assumption, refused unless the entity is absent, proves it.
	assumed bool
	fence   Fence                                // with a Host.Cluster: the fence the state was loaded under
	legacy  legacyNote                           // what the load learned of the legacy key (ShardedRedisStore)
	queued  entityrun.Queue[*call[S], effect[S]] // runQueued's
	call    call[S]                              // what a command runs with (run), kept to spare an allocation a command
	writing S                                    // the state encode encodes, held here to spare an allocation a write
}

// Receive runs a command, and with it the commands queued behind it when
// the store writes batches (see runQueued).
func (a *entityActor[S]) Receive(ctx *runtime.Context[envelope[S]], env envelope[S]) {
	if a.r.batch != nil && a.queued.Take(ctx, env, a.runQueued) {
		return
	}
	a.receive(env)
}

// receive runs one command and replies.
func (a *entityActor[S]) receive(env envelope[S]) { entityrun.Answer(env, a.handle) }

// run runs env's command on state, the entity's call struct holding what
// it runs with (a command runs on the entity's goroutine, one at a time),
// cleared after so that it holds nothing while the entity idles.
func (a *entityActor[S]) run(env envelope[S], state S) (effect[S], error) {
	a.call = call[S]{ctx: env.Ctx, client: a.r.host.Client, entityID: a.id, state: state}
	defer func() { a.call = call[S]{} }()
	return env.Cmd.Run(&a.call, env.Arg)
}

// op names a command on the entity in errors.
func (a *entityActor[S]) op(env envelope[S]) string {
	return entityrun.Op(a.r.t.ComponentID(), env.Cmd.Name, a.id)
}

// handle runs the command and carries out its effect. The state is written
// before the reply; a write that fails is the caller's error and leaves the
// state as it was. What the entity holds in memory may be stale when
// another server instance wrote since: a write then conflicts, and a reply
// that writes nothing checks the stored revision first; either way the
// entity reloads and runs the command again.
//
// With a Host.Cluster the entity is this instance's alone while it serves
// the shard, so a reply that writes nothing is answered from memory with
// no store round trip; every command first compares the shard's fence
// with the one the state was loaded under (reloading when it changed),
// and when this instance no longer serves the shard, or the store refused
// a write by the fence, the entity drops its state and the command fails
// with ErrMoved, for Invoke to route it again.
func (a *entityActor[S]) handle(env envelope[S]) (any, error) {
	ctx, r := env.Ctx, a.r
	// op names the command in errors; made only when there is one, since
	// this is every command's path.
	op := func() string { return a.op(env) }
	verify := false // an assumption failed: read the state
	for conflicts := 0; ; conflicts++ {
		if conflicts > r.host.MaxConflicts {
			return nil, fmt.Errorf("%s: %d write conflicts in a row: %w", op(), conflicts-1, ErrConflict)
		}
		if conflicts > 1 {
			// Instances that keep colliding on one entity take turns at
			// random, or they could collide in lockstep until one gives up.
			if err := sleepJitter(ctx, r.host.System.Clock(), conflicts); err != nil {
				return nil, fmt.Errorf("%s: %w", op(), err)
			}
		}
		fence, serving := a.serving()
		if !serving {
			a.drop()
			return nil, fmt.Errorf("%s: %w", op(), ErrMoved)
		}
		if a.loaded && fence != a.fence {
			a.loaded = false // the shard moved and came back: another owner may have written
		}
		if !a.loaded {
			if r.t.expectNew && !verify {
				a.assumeAbsent()
			} else if err := a.load(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", op(), err)
			}
			a.fence = fence
		}
		state, err := a.fresh()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op(), err)
		}
		eff, err := a.run(env, state)
		if a.assumed && (err != nil || eff.kind != updateThenReply) {
			// Only a write checks the assumption: anything else (a
			// handler's failure too) is answered from the state as stored.
			a.loaded, a.assumed, verify = false, false, true
			conflicts--
			continue
		}
		if err != nil {
			return nil, err
		}
		applied, err := a.applied(env, eff)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op(), err)
		}
		switch eff.kind {
		case replyOnly, failWith:
			if applied != nil && r.recorder != nil {
				// A caller's key: the answer is recorded, so that a retry
				// gets this one even if the state changes meanwhile.
				err := a.record(ctx, applied)
				if ok, first := replayed(err); ok {
					return first.Value, first.Err
				}
				if errors.Is(err, ErrConflict) {
					a.loaded = false
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("%s: record the answer: %w", op(), err)
				}
			} else if r.fenced == nil {
				rev, err := a.revision(ctx)
				if err != nil {
					return nil, fmt.Errorf("%s: check the state is fresh: %w", op(), err)
				}
				if rev != a.rev {
					a.loaded = false
					continue
				}
			}
			if eff.kind == failWith {
				return nil, &components.CommandError{Kind: eff.refusal, Message: eff.message}
			}
			return eff.reply, nil
		case updateThenReply:
			data, err := a.encode(eff.state)
			if err != nil {
				return nil, fmt.Errorf("%s: encode the state: %w", op(), err)
			}
			rev, err := a.save(withApplied(ctx, applied), data)
			if a.assumed {
				// Written: the entity was absent. Else it is read next.
				a.assumed = false
				if err != nil {
					a.loaded, verify = false, true
				}
			}
			if ok, first := replayed(err); ok {
				a.loaded = false // written by a first attempt this entity may not hold
				return first.Value, first.Err
			}
			if errors.Is(err, ErrConflict) {
				a.loaded = false
				continue
			}
			if errors.Is(err, ErrFenced) {
				a.drop()
				return nil, fmt.Errorf("%s: %w: %w", op(), ErrMoved, err)
			}
			if err != nil {
				// Whether it was written is unknown: the next command finds out.
				return nil, fmt.Errorf("%s: save the state: %w", op(), err)
			}
			if err := a.keepWritten(data, rev, eff.state); err != nil {
				return nil, fmt.Errorf("%s: %w", op(), err)
			}
			return eff.reply, nil
		case deleteThenReply:
			err := a.delete(withApplied(ctx, applied))
			if ok, first := replayed(err); ok {
				a.loaded = false
				return first.Value, first.Err
			}
			if errors.Is(err, ErrConflict) {
				a.loaded = false
				continue
			}
			if errors.Is(err, ErrFenced) {
				a.drop()
				return nil, fmt.Errorf("%s: %w: %w", op(), ErrMoved, err)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: delete the state: %w", op(), err)
			}
			if err := a.keep(nil, 0); err != nil {
				return nil, fmt.Errorf("%s: %w", op(), err)
			}
			return eff.reply, nil
		}
		return nil, fmt.Errorf("%s: unknown effect %d", op(), eff.kind)
	}
}

// applied is the record of env's command and its effect eff, to be
// written with the effect: nil when the command carries no key (see
// commandKey), and when it carries only a command id and changes nothing
// (running it again changes nothing either).
func (a *entityActor[S]) applied(env envelope[S], eff effect[S]) (*Applied, error) {
	if _, caller := commandKey(env.Ctx, env.Cmd.Name); !caller && (eff.kind == replyOnly || eff.kind == failWith) {
		return nil, nil
	}
	var refusal *components.CommandError
	if eff.kind == failWith {
		refusal = &components.CommandError{Kind: eff.refusal, Message: eff.message}
	}
	return AppliedFor(env.Ctx, env.Cmd.Name, eff.reply, refusal, a.r.host.KeyRetention, a.r.host.CommandIDRetention)
}

// record writes the applied record of a command that changed nothing,
// over revision a.rev.
func (a *entityActor[S]) record(ctx context.Context, applied *Applied) (err error) {
	ctx, span := tracing.StartStore(ctx, a.r.tracer(), "entity record", a.r.t.ComponentID(), a.id)
	defer func() { tracing.End(span, components.ErrorType(err)) }()
	return a.r.recorder.Record(ctx, a.r.t.ComponentID(), a.id, a.rev, *applied)
}

// serving is the fence of the entity's shard and whether this instance
// serves it now; without a Host.Cluster, always (under no fence).
func (a *entityActor[S]) serving() (Fence, bool) {
	if a.r.host.Cluster == nil {
		return Fence{}, true
	}
	return a.r.host.Cluster.Fence(a.r.t.ComponentID(), a.id)
}

// drop forgets the state: the shard is no longer this instance's.
func (a *entityActor[S]) drop() {
	var zero S
	a.data, a.state, a.rev, a.loaded, a.assumed, a.fence, a.legacy = nil, zero, 0, false, false, Fence{}, legacyNote{}
}

// assumeAbsent holds the empty state without reading the store, for a
// type that expects new entities: as a load that found nothing, here or
// under the legacy key (such a type is never there).
func (a *entityActor[S]) assumeAbsent() {
	a.legacy = legacyNote{known: true}
	_ = a.keep(nil, 0) // revision 0 is the empty state: nothing to decode, nothing to fail
	a.loaded, a.assumed = true, true
}

// save writes data over revision a.rev: under the fence with a cluster.
func (a *entityActor[S]) save(ctx context.Context, data []byte) (rev uint64, err error) {
	ctx, span := tracing.StartStore(ctx, a.r.tracer(), "entity save", a.r.t.ComponentID(), a.id)
	defer func() { tracing.End(span, components.ErrorType(err)) }()
	if a.r.fenced != nil {
		return a.r.fenced.SaveFenced(withLegacyNote(ctx, &a.legacy), a.fence, a.r.t.ComponentID(), a.id, data, a.rev)
	}
	return a.r.host.Store.Save(ctx, a.r.t.ComponentID(), a.id, data, a.rev)
}

// delete deletes the state at revision a.rev: under the fence with a
// cluster.
func (a *entityActor[S]) delete(ctx context.Context) (err error) {
	ctx, span := tracing.StartStore(ctx, a.r.tracer(), "entity delete", a.r.t.ComponentID(), a.id)
	defer func() { tracing.End(span, components.ErrorType(err)) }()
	if a.r.fenced != nil {
		return a.r.fenced.DeleteFenced(withLegacyNote(ctx, &a.legacy), a.fence, a.r.t.ComponentID(), a.id, a.rev)
	}
	return a.r.host.Store.Delete(ctx, a.r.t.ComponentID(), a.id, a.rev)
}

// revision reads the stored revision, to check the state held is fresh.
func (a *entityActor[S]) revision(ctx context.Context) (rev uint64, err error) {
	ctx, span := tracing.StartStore(ctx, a.r.tracer(), "entity revision", a.r.t.ComponentID(), a.id)
	defer func() { tracing.End(span, components.ErrorType(err)) }()
	return a.r.host.Store.Revision(ctx, a.r.t.ComponentID(), a.id)
}

// load reads the state from the store; absent is the empty state.
func (a *entityActor[S]) load(ctx context.Context) error {
	ctx, span := tracing.StartStore(ctx, a.r.tracer(), "entity load", a.r.t.ComponentID(), a.id)
	a.legacy = legacyNote{}
	rec, err := a.r.host.Store.Load(withLegacyNote(ctx, &a.legacy), a.r.t.ComponentID(), a.id)
	tracing.End(span, components.ErrorType(err))
	if err != nil {
		return fmt.Errorf("load the state: %w", err)
	}
	if err := a.keep(rec.Data, rec.Revision); err != nil {
		return err
	}
	a.loaded = true
	return nil
}

// keep holds data, the state as stored at revision rev, and for a type
// that holds its state decoded (flat, or KeepDecoded) its decode. A decode
// that fails leaves the entity to be loaded again by the next command.
func (a *entityActor[S]) keep(data []byte, rev uint64) error {
	a.data, a.rev = data, rev
	if !a.r.t.holdsDecoded() {
		return nil
	}
	state, err := a.r.t.decode(a.id, rev, data)
	if err != nil {
		a.loaded = false
		return err
	}
	a.state = state
	return nil
}

// keepWritten is keep for data that a command's handler returned as
// state: a KeepDecoded type holds that state as it is, with no decode.
func (a *entityActor[S]) keepWritten(data []byte, rev uint64, state S) error {
	if !a.r.t.keepDecoded {
		return a.keep(data, rev)
	}
	a.data, a.rev, a.state = data, rev, state
	return nil
}

// encode is the stored form of state. It encodes the actor's own copy:
// encode's pointer escapes (a StateAppender is called through an
// interface), so a pointer to a local would move it to the heap on every
// write, where the actor is already.
func (a *entityActor[S]) encode(state S) ([]byte, error) {
	a.writing = state
	defer func() { var zero S; a.writing = zero }()
	return encode(&a.writing)
}

// fresh is the state a command's handler gets: its own, sharing nothing
// with what the entity holds (or, for a KeepDecoded type, nothing its
// handler changes in place).
func (a *entityActor[S]) fresh() (S, error) {
	if a.r.t.holdsDecoded() {
		return a.state, nil
	}
	return a.r.t.decode(a.id, a.rev, a.data)
}

// maxJitter bounds the pause before a retry after write conflicts.
const maxJitter = 25 * time.Millisecond

// sleepJitter waits a random time under n milliseconds (under maxJitter)
// on clock, the entity's system clock, or until ctx ends, and then returns
// an error wrapping ctx's. A fake clock must be advanced for the wait to
// end; moving it by maxJitter always does.
func sleepJitter(ctx context.Context, clock clockwork.Clock, n int) error {
	t := clock.NewTimer(rand.N(min(time.Duration(n)*time.Millisecond, maxJitter)))
	defer t.Stop()
	select {
	case <-t.Chan():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pause after %d write conflicts: %w", n, ctx.Err())
	}
}
