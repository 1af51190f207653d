package deliverytest

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/runtime"
)

// Faults says what a faultLink does to each internal message in one
// direction, with probabilities drawn from the link's seeded RNG.
type Faults struct {
	drop     float64       // lose the message
	dup      float64       // deliver it twice
	delay    float64       // hold it back, so later messages overtake it
	maxDelay time.Duration // the longest hold-back
	// lag holds every message back for up to lag, keeping their order:
	// a slow link, not a reordering one.
	lag time.Duration

	lagged   []laggedMessage // held by lag, in order
	lagArmed bool            // a linkLagTick is due
}

// laggedMessage is a message that lag holds back until at.
type laggedMessage struct {
	at   time.Time
	send func()
}

// linkStats counts what a faultLink did.
type linkStats struct {
	Passed, dropped, duplicated, delayed atomic.Int64
}

// FaultLink sits between a producer controller and a consumer controller,
// as an unreliable network would: two actors, one each way, that lose,
// repeat or delay the internal messages (SequencedMessage one way; Request,
// Resend, Ack and RegisterConsumer the other). They rewrite the refs in the
// messages so that every answer goes through the link too.
//
// Connect with RegisterToProducerController{toPC} to the consumer
// controller, or RegisterConsumer{toCC} to the producer controller. A link
// made without a producer controller (work pulling and sharding, whose
// producer controllers are made as needed) sends the answers to the one
// whose SequencedMessage came last.
type FaultLink[A any] struct {
	toCC       runtime.Ref[delivery.ConsumerCommand[A]]
	ToPC       runtime.Ref[delivery.ProducerCommand[A]]
	toCCStats  linkStats
	ToPCStats  linkStats
	pc         runtime.Ref[delivery.ProducerCommand[A]]
	cc         runtime.Ref[delivery.ConsumerCommand[A]]
	ccFaults   Faults
	pcFaults   Faults
	delayCount atomic.Uint64
	sentMax    atomic.Int64 // the highest SequencedMessage number the producer side sent through
	passedMu   sync.Mutex
	passed     []passedChunk                                            // the chunks that reached the consumer controller, in order
	learned    atomic.Pointer[runtime.Ref[delivery.ProducerCommand[A]]] // with pc nil: the last sender

	// The test's own choices, made before the random faults: gate says
	// what to do with each message, and held keeps those it holds back
	// until release.
	gateMu sync.Mutex
	gate   func(m any) Verdict
	held   []heldMessage
}

// Verdict is what a link's gate does with one message.
type Verdict uint8

// The verdicts of a gate.
const (
	Pass     Verdict = iota // on to the random faults, if any, then through
	Drop                    // lose it
	Hold                    // keep it until the test releases it
	HoldCopy                // pass it, and keep a copy until the test releases it
)

// heldMessage is a message a link holds back, and how to send it on.
type heldMessage struct {
	msg  any
	send func()
}

// SetGate makes gate decide, from now on, what the link does with each
// message (a *SequencedMessage one way; RegisterConsumer, Request, Resend,
// Ack or *Ack the other).
func (l *FaultLink[A]) SetGate(gate func(m any) Verdict) {
	l.gateMu.Lock()
	defer l.gateMu.Unlock()
	l.gate = gate
}

// gated applies the gate to m, and reports whether it took the message.
func (l *FaultLink[A]) gated(m any, send func()) bool {
	l.gateMu.Lock()
	defer l.gateMu.Unlock()
	if l.gate == nil {
		return false
	}
	switch l.gate(m) {
	case Drop:
		return true
	case Hold:
		l.held = append(l.held, heldMessage{msg: m, send: send})
		return true
	case HoldCopy:
		l.held = append(l.held, heldMessage{msg: m, send: send})
	}
	return false
}

// HeldCount is how many held messages match.
func (l *FaultLink[A]) HeldCount(match func(m any) bool) int {
	l.gateMu.Lock()
	defer l.gateMu.Unlock()
	n := 0
	for _, h := range l.held {
		if match(h.msg) {
			n++
		}
	}
	return n
}

// Release sends on, in the order they came, the held messages that
// match, and returns how many.
func (l *FaultLink[A]) Release(match func(m any) bool) int {
	l.gateMu.Lock()
	var out []heldMessage
	kept := l.held[:0]
	for _, h := range l.held {
		if match(h.msg) {
			out = append(out, h)
		} else {
			kept = append(kept, h)
		}
	}
	l.held = kept
	l.gateMu.Unlock()
	for _, h := range out {
		h.send()
	}
	return len(out)
}

// producerController is where the answers go: pc, or the one learned.
func (l *FaultLink[A]) producerController() runtime.Ref[delivery.ProducerCommand[A]] {
	if l.pc != nil {
		return l.pc
	}
	if p := l.learned.Load(); p != nil {
		return *p
	}
	return nil
}

// toProducer sends an answer to the producer controller, if there is one yet.
func (l *FaultLink[A]) toProducer(m delivery.ProducerCommand[A]) {
	if pc := l.producerController(); pc != nil {
		pc.Tell(m)
	}
}

// toConsumer passes a SequencedMessage on as a producer controller sends
// it: postponable, so that a consumer controller with a delivery out holds
// it (runtime.PostponeWakeups), and the faults meet that path too.
func (l *FaultLink[A]) toConsumer(m delivery.ConsumerCommand[A]) {
	if sm, ok := m.(*delivery.SequencedMessage[A]); ok && sm.Chunk != nil {
		l.passedMu.Lock()
		l.passed = append(l.passed, passedChunk{seqNr: sm.SeqNr, chunk: sm.Chunk})
		l.passedMu.Unlock()
	}
	runtime.TellPostponable(l.cc, m)
}

// linkDelayed is a message the link held back, back from its timer.
type linkDelayed struct{ msg any }

// linkLagTick says that the head of a direction's lagged messages is due.
type linkLagTick struct{ f *Faults }

// The link's own messages (linkDelayed, linkLagTick) travel wrapped as
// commands of the controllers it stands for.

// NewFaultLink spawns the two actors of a link between pc and cc, with
// random streams derived from seed.
func NewFaultLink[A any](t testing.TB, sys *runtime.System, name string, pc runtime.Ref[delivery.ProducerCommand[A]],
	cc runtime.Ref[delivery.ConsumerCommand[A]], toCC, toPC Faults, seed uint64) *FaultLink[A] {
	t.Helper()
	l := &FaultLink[A]{pc: pc, cc: cc, ccFaults: toCC, pcFaults: toPC}
	var err error
	l.toCC, err = runtime.Spawn(sys, name+"-to-cc", func() runtime.Behavior[delivery.ConsumerCommand[A]] {
		rng := rand.New(rand.NewPCG(seed, 1))
		return runtime.ReceiveFunc(func(ctx *runtime.Context[delivery.ConsumerCommand[A]], m delivery.ConsumerCommand[A]) {
			if v, ok := impl.UnwrapConsumer(m); ok {
				switch v := v.(type) {
				case linkDelayed:
					l.toConsumer(v.msg.(delivery.ConsumerCommand[A]))
				case linkLagTick:
					releaseLagged(ctx, v.f, impl.WrapConsumer[A])
				}
				return
			}
			switch m := m.(type) {
			case *delivery.SequencedMessage[A]:
				if m.SeqNr > l.sentMax.Load() {
					l.sentMax.Store(m.SeqNr)
				}
				if l.pc == nil {
					if p := l.learned.Load(); p == nil || *p != m.ProducerController {
						pc := m.ProducerController
						l.learned.Store(&pc)
					}
				}
				c := *m // shared with the producer controller: copy, never modify
				c.ProducerController = l.ToPC
				linkApply(ctx, rng, l, &l.ccFaults, &l.toCCStats, delivery.ConsumerCommand[A](&c), l.toConsumer, impl.WrapConsumer[A])
			default:
				l.cc.Tell(m)
			}
		})
	})
	if err != nil {
		t.Fatalf("spawn link: %v", err)
	}
	l.ToPC, err = runtime.Spawn(sys, name+"-to-pc", func() runtime.Behavior[delivery.ProducerCommand[A]] {
		rng := rand.New(rand.NewPCG(seed, 2))
		return runtime.ReceiveFunc(func(ctx *runtime.Context[delivery.ProducerCommand[A]], m delivery.ProducerCommand[A]) {
			if v, ok := impl.UnwrapProducer(m); ok {
				switch v := v.(type) {
				case linkDelayed:
					l.toProducer(v.msg.(delivery.ProducerCommand[A]))
				case linkLagTick:
					releaseLagged(ctx, v.f, impl.WrapProducer[A])
				}
				return
			}
			switch m := m.(type) {
			case delivery.RegisterConsumer[A]:
				m.ConsumerController = l.toCC
				linkApply(ctx, rng, l, &l.pcFaults, &l.ToPCStats, delivery.ProducerCommand[A](m), l.toProducer, impl.WrapProducer[A])
			case delivery.Request[A], delivery.Resend[A], delivery.Ack[A], *delivery.Ack[A]:
				linkApply(ctx, rng, l, &l.pcFaults, &l.ToPCStats, m, l.toProducer, impl.WrapProducer[A])
			default:
				l.toProducer(m)
			}
		})
	})
	if err != nil {
		t.Fatalf("spawn link: %v", err)
	}
	return l
}

// linkApply passes m on through send, or loses, repeats or delays it; wrap
// makes the link's own messages Ts.
func linkApply[T, A any](ctx *runtime.Context[T], rng *rand.Rand, l *FaultLink[A], f *Faults, st *linkStats, m T, send func(T), wrap func(any) T) {
	if l.gated(m, func() { send(m) }) {
		return
	}
	if rng.Float64() < f.drop {
		st.dropped.Add(1)
		return
	}
	copies := 1
	if rng.Float64() < f.dup {
		st.duplicated.Add(1)
		copies = 2
	}
	for range copies {
		if f.maxDelay > 0 && rng.Float64() < f.delay {
			st.delayed.Add(1)
			d := time.Duration(rng.Int64N(int64(f.maxDelay))) + 1
			held := wrap(linkDelayed{msg: m})
			ctx.Timers().StartSingle(l.delayCount.Add(1), held, d)
			continue
		}
		st.Passed.Add(1)
		if f.lag > 0 {
			lagSend(ctx, rng, f, func() { send(m) }, wrap)
			continue
		}
		send(m)
	}
}

// lagSend holds send back for a random time up to f.lag, after every
// message held before it.
func lagSend[T any](ctx *runtime.Context[T], rng *rand.Rand, f *Faults, send func(), wrap func(any) T) {
	at := time.Now().Add(time.Duration(rng.Int64N(int64(f.lag))))
	if n := len(f.lagged); n > 0 && at.Before(f.lagged[n-1].at) {
		at = f.lagged[n-1].at
	}
	f.lagged = append(f.lagged, laggedMessage{at: at, send: send})
	armLag(ctx, f, wrap)
}

// releaseLagged sends, in order, the lagged messages that are due.
func releaseLagged[T any](ctx *runtime.Context[T], f *Faults, wrap func(any) T) {
	f.lagArmed = false
	now := time.Now()
	i := 0
	for ; i < len(f.lagged) && !f.lagged[i].at.After(now); i++ {
		f.lagged[i].send()
	}
	f.lagged = f.lagged[i:]
	armLag(ctx, f, wrap)
}

func armLag[T any](ctx *runtime.Context[T], f *Faults, wrap func(any) T) {
	if f.lagArmed || len(f.lagged) == 0 {
		return
	}
	f.lagArmed = true
	ctx.Timers().StartSingle(f, wrap(linkLagTick{f: f}), max(time.Until(f.lagged[0].at), 0))
}
