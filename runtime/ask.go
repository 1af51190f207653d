package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync/atomic"
	"time"

	"github.com/trellis-go/trellis/internal/deadlines"
)

// Ask sends the message that build makes for a one-off reply address and
// waits for the reply, from plain Go code. It returns an error wrapping
// [ErrAskTimeout] and ctx's error when ctx ends first (give it a deadline);
// a reply that comes later is a dead letter.
//
// With a ctx that never ends (no deadline, no cancel), the asker waits
// for as long as the actor takes in any case, so an actor of this
// instance that is idle handles the request at once on the asker's
// goroutine, as [Sharding.Run] does (two hand-offs between goroutines
// saved: to a worker and back); mail that comes meanwhile is left to the
// dispatcher, and order, one message at a time and supervision are kept.
// With a ctx that can end, the request always goes through the
// dispatcher, so that the asker gives up when ctx ends even while the
// actor's Receive blocks.
func Ask[Req, Resp any](ctx context.Context, to Ref[Req], build func(replyTo Ref[Resp]) Req) (Resp, error) {
	r := &replyRef[Resp]{ch: make(chan Resp, 1)}
	if t := to.target(); t != nil {
		r.sys = t.system()
	} else if e, ok := to.(*entityRef[Req]); ok {
		r.sys = e.s.sys // no actor behind it, but a system to count dead letters
	}
	if ctx.Done() != nil {
		to.Tell(build(r))
		if c, ok := to.(*cell[Req]); ok && c.d.busy.Load() {
			// The processors are busy: a yield would wait behind their
			// goroutines, and so would the spinning worker the mail is
			// left to. Wake a parked worker onto this processor instead,
			// to run as soon as the asker blocks.
			c.d.wakeParked()
		} else {
			// Yield the processor once before blocking: an actor of this
			// instance usually replies meanwhile, and finding its reply
			// here saves parking on two channels, ctx's and the reply's,
			// which costs more than the rest of an ask.
			goruntime.Gosched()
		}
	} else {
		runHere(to, build(r))
	}
	select {
	case resp := <-r.ch:
		return resp, nil
	default:
	}
	select {
	case resp := <-r.ch:
		return resp, nil
	case <-ctx.Done():
		if !r.state.CompareAndSwap(replyOpen, replyGaveUp) {
			// A reply claimed the address first: it is in the channel or
			// about to be, so take it rather than lose it.
			return <-r.ch, nil
		}
		var zero Resp
		return zero, fmt.Errorf("ask %s: %w: %w", to.Path(), ErrAskTimeout, ctx.Err())
	}
}

// runHere hands msg to an idle actor of this instance, or an entity here,
// by running it on the caller's goroutine (see Ask); else it tells it.
func runHere[T any](to Ref[T], msg T) {
	switch t := to.(type) {
	case *cell[T]:
		switch ok, mine := t.tellWaking(msg, wakeClaim); {
		case mine:
			t.runClaimed()
		case !ok:
			t.sys.deadLetter(t, msg)
		}
	case *entityRef[T]:
		t.s.Run(t.id, msg)
	default:
		to.Tell(msg)
	}
}

// States of a replyRef: a reply and the asker giving up race to move it
// out of replyOpen, so every reply is either returned or a dead letter.
const (
	replyOpen   uint32 = iota // waiting for the reply
	replyTaken                // a reply claimed the address and is sent on ch
	replyGaveUp               // the asker gave up: replies are dead letters
)

// replyRef is the reply address of an Ask from plain Go code: it takes one
// reply; anything after that, or after the asker gave up, is a dead letter.
type replyRef[T any] struct {
	ch    chan T // capacity 1: the one reply never blocks its sender
	sys   *System
	state atomic.Uint32
}

func (r *replyRef[T]) Tell(msg T) {
	if r.state.CompareAndSwap(replyOpen, replyTaken) {
		r.ch <- msg
		return
	}
	if r.sys != nil {
		r.sys.deadLetter(r, msg)
	}
}

func (r *replyRef[T]) Path() string      { return "/temp/ask" }
func (r *replyRef[T]) target() actorCell { return nil }

// AskFrom asks from inside an actor without blocking it: the reply, or
// [ErrAskTimeout] after timeout, comes back to the actor as the message that
// adapt makes of it. adapt runs on the replying goroutine, so it must only
// map values. A reply after the timeout is a dead letter.
//
// The ask belongs to the actor, not to one incarnation of its behavior: a
// restart keeps it. When the actor stops first, the ask is abandoned:
// nothing is delivered for it, and a reply that still comes is a dead
// letter like any mail to a stopped actor.
func AskFrom[T, Req, Resp any](ctx *Context[T], to Ref[Req], timeout time.Duration,
	build func(replyTo Ref[Resp]) Req, adapt func(Resp, error) T) {
	c := ctx.c
	x := c.ext()
	if x.asks == nil {
		x.asks = deadlines.New(c.sys.clock)
	}
	r := &actorReplyRef[T, Resp]{self: c, adapt: adapt, to: to}
	x.asks.Add(r, timeout)
	to.Tell(build(r))
}

// actorReplyRef is the reply address of an AskFrom and its entry in the
// asker's book of timeouts.
type actorReplyRef[T, Resp any] struct {
	self            *cell[T]
	adapt           func(Resp, error) T
	to              AnyRef // for the timeout's error; its path is made only then
	deadlines.Entry        // Done: the reply came or the timeout passed
}

// Tell delivers the reply. Marking the ask done is all the book needs: it
// sweeps the ask out later, on the asker's goroutine or the timer's, so
// the replier takes no lock of the asker's.
func (r *actorReplyRef[T, Resp]) Tell(msg Resp) {
	if !r.Done.CompareAndSwap(false, true) {
		r.self.sys.deadLetter(r, msg)
		return
	}
	r.self.Tell(r.adapt(msg, nil))
}

// Expire delivers ErrAskTimeout. To an asker that has begun to stop it
// delivers nothing, as its Timers would not: the runtime's own
// notification is not mail that someone sent, so not a dead letter.
func (r *actorReplyRef[T, Resp]) Expire() {
	if r.Done.CompareAndSwap(false, true) {
		var zero Resp
		r.self.tellAlive(r.adapt(zero, fmt.Errorf("ask %s: %w", r.to.Path(), ErrAskTimeout)))
	}
}

// BookEntry is the ask's place in its asker's book of timeouts.
func (r *actorReplyRef[T, Resp]) BookEntry() *deadlines.Entry { return &r.Entry }

func (r *actorReplyRef[T, Resp]) Path() string      { return r.self.Path() + "/$ask" }
func (r *actorReplyRef[T, Resp]) target() actorCell { return nil }

var _ deadlines.Wait = (*actorReplyRef[int, int])(nil)
