package entities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/tracing"
)

// runQueued runs commands that were queued together, in order: one at a
// time until the entity is loaded, exists and serves its shard under the
// fence it was loaded with; from then on, the rest as a batch.
func (a *entityActor[S]) runQueued(envs []envelope[S]) {
	for i, env := range envs {
		if a.batchable() {
			a.runBatch(envs[i:])
			return
		}
		a.receive(env)
	}
}

// batchable says whether the entity's next commands can run as a batch.
func (a *entityActor[S]) batchable() bool {
	if !a.loaded || a.rev == 0 {
		return false // a load or a create goes alone
	}
	f, serving := a.serving()
	return serving && f == a.fence
}

// batch is what runBatch holds: the state the commands so far left (data,
// and the state itself for a type that holds it decoded), the updates not
// yet written, and the replies that wait for them.
type batch[S any] struct {
	data    []byte
	state   S
	updates []Update
	held    []heldReply[S]
}

type heldReply[S any] struct {
	env   envelope[S]
	out   outcome
	wrote bool // the command updated the state: its reply is the write's
}

// runBatch runs commands, each on the state the ones before it left, and
// writes what they updated in one script (saveBatch). A reply given after
// an update waits for that write, so that none is answered from a state
// that is not stored; one before any update is given at once. When the
// write conflicts, or a command's applied record is kept already, nothing
// was written, and the held commands run again one at a time from the
// stored state; when the fence refuses it or it fails, each held command
// that wrote fails as it would have alone, and one that wrote nothing
// runs again (a read is answered truthfully, not with the write's
// failure). A delete ends
// the batch: what is held is written first, then the delete and the
// commands after it run one at a time.
func (a *entityActor[S]) runBatch(envs []envelope[S]) {
	b := &batch[S]{data: a.data, state: a.state}
	for i, env := range envs {
		if err := env.Ctx.Err(); err != nil {
			env.Reply <- outcome{Err: err}
			continue
		}
		eff, err := a.runOn(b, env)
		var applied *Applied
		if err == nil {
			applied, err = a.applied(env, eff)
		}
		switch {
		case err == nil && applied != nil && eff.kind != updateThenReply:
			// A caller's key on a command that changes nothing, or on a
			// delete: its record is a write of its own. The batch ends
			// here, as at a delete.
			a.flush(b)
			for _, e := range envs[i:] {
				a.receive(e)
			}
			return
		case err != nil:
			b.hold(env, outcome{Err: err}, false)
		case eff.kind == replyOnly:
			b.hold(env, outcome{Value: eff.reply}, false)
		case eff.kind == failWith:
			b.hold(env, outcome{Err: &components.CommandError{Kind: eff.refusal, Message: eff.message}}, false)
		case eff.kind == updateThenReply:
			if err := a.update(b, env, eff.state, applied); err != nil {
				b.hold(env, outcome{Err: err}, false)
				continue
			}
			b.hold(env, outcome{Value: eff.reply}, true)
		default: // a delete
			a.flush(b)
			for _, e := range envs[i:] {
				a.receive(e)
			}
			return
		}
	}
	a.flush(b)
}

// runOn runs env's command on a state of its own: b's.
func (a *entityActor[S]) runOn(b *batch[S], env envelope[S]) (effect[S], error) {
	state := b.state
	if !a.r.t.holdsDecoded() {
		var err error
		if state, err = a.r.t.decode(a.id, a.rev, b.data); err != nil {
			return effect[S]{}, fmt.Errorf("%s: %w", a.op(env), err)
		}
	}
	return a.run(env, state)
}

// update makes state b's and queues its write.
func (a *entityActor[S]) update(b *batch[S], env envelope[S], state S, applied *Applied) error {
	data, err := a.encode(state)
	if err != nil {
		return fmt.Errorf("%s: encode the state: %w", a.op(env), err)
	}
	switch {
	case a.r.t.keepDecoded: // as keepWritten does
		b.state = state
	case a.r.t.flat:
		// As keep does: what the next command gets is the state as stored.
		if state, err = a.r.t.decode(a.id, a.rev, data); err != nil {
			return fmt.Errorf("%s: %w", a.op(env), err)
		}
		b.state = state
	}
	b.data = data
	b.updates = append(b.updates, Update{Data: data, TraceContext: tracing.CaptureForLink(env.Ctx), Applied: applied})
	return nil
}

// hold keeps env's reply until the updates before it are written; with
// none, it is given at once. wrote says env's command updated the state.
func (b *batch[S]) hold(env envelope[S], out outcome, wrote bool) {
	if len(b.updates) == 0 {
		env.Reply <- out
		return
	}
	b.held = append(b.held, heldReply[S]{env: env, out: out, wrote: wrote})
}

// flush writes b's updates and gives the held replies (see runBatch); it
// ends the batch.
func (a *entityActor[S]) flush(b *batch[S]) {
	if len(b.updates) == 0 {
		return
	}
	ctx, cancel := a.writeContext(b)
	revs, err := a.saveBatch(ctx, b.updates)
	cancel()
	switch {
	case err == nil:
		keepErr := a.keepWritten(b.data, revs[len(revs)-1], b.state)
		for _, h := range b.held {
			if keepErr != nil { // written, but not kept: the next command loads it
				h.out = outcome{Err: fmt.Errorf("%s: %w", a.op(h.env), keepErr)}
			}
			h.env.Reply <- h.out
		}
	case errors.Is(err, ErrConflict), errors.As(err, new(*AlreadyAppliedError)):
		// Nothing was written: each runs again alone, and a command
		// applied already gets its first answer.
		a.loaded = false
		for _, h := range b.held {
			a.receive(h.env)
		}
	case errors.Is(err, ErrFenced):
		a.drop()
		for _, h := range b.held {
			h.env.Reply <- outcome{Err: fmt.Errorf("%s: %w: %w", a.op(h.env), ErrMoved, err)}
		}
	default:
		// Whether it was written is unknown: the next command finds out.
		// A command that wrote shares that unknown; one that did not (a
		// read, a refusal) changed nothing and runs again, alone, on the
		// state as the entity holds it, which none of the batch's writes
		// is known to have changed.
		for _, h := range b.held {
			if h.wrote {
				h.env.Reply <- outcome{Err: fmt.Errorf("%s: save the state: %w", a.op(h.env), err)}
				continue
			}
			a.receive(h.env)
		}
	}
}

// writeContext is the context of a batch's write (WriteContext); b.held
// starts with its first writer.
func (*entityActor[S]) writeContext(b *batch[S]) (context.Context, context.CancelFunc) {
	return WriteContext(b.held, func(h heldReply[S]) context.Context { return h.env.Ctx })
}

// WriteContext is the context of one write made for the commands of held,
// whose contexts ctxOf gives, the first of them a writer: its values (its
// trace), not its cancellation, since the write is every command's; and
// the latest of their deadlines, when each has one. Entity kinds that
// batch their writes (package eventsourced) share it.
func WriteContext[T any](held []T, ctxOf func(T) context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctxOf(held[0]))
	var latest time.Time
	for _, h := range held {
		d, ok := ctxOf(h).Deadline()
		if !ok {
			return base, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(base, latest)
}

// saveBatch writes updates over revision a.rev under the entity's fence.
func (a *entityActor[S]) saveBatch(ctx context.Context, updates []Update) (revs []uint64, err error) {
	ctx, span := tracing.StartStore(ctx, a.r.tracer(), "entity save", a.r.t.ComponentID(), a.id)
	defer func() { tracing.End(span, components.ErrorType(err)) }()
	return a.r.batch.SaveFencedBatch(ctx, a.fence, a.r.t.ComponentID(), a.id, updates, a.rev)
}
