package deliverytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// Job is the message of most tests.
type Job struct {
	N   int    `json:"n"`
	Pad string `json:"pad,omitempty"`
}

// ProdMsg is the protocol of testProducer: a RequestNext (of point to
// point or work pulling, or of sharding), a timer that says to send now, or
// an ask's reply.
type ProdMsg struct {
	next  *delivery.RequestNext[Job]
	snext *sharding.RequestNext[Job]
	send  bool
	reply delivery.SeqNr
	job   int // the job an ask's reply is for
	err   error
}

// ProducerSpec describes a testProducer.
type ProducerSpec struct {
	Limit    int                   // jobs to send, numbered 1..limit; 0: no limit
	Ask      bool                  // send with MessageWithConfirmation and report the replies
	Pad      string                // padding of every job, to make it large
	Delay    func() time.Duration  // wait before sending each job; nil: none
	Replies  chan<- delivery.SeqNr // with ask: every reply
	accepted chan<- int            // with ask: the number of every job replied to
	// BySeqNr numbers each job with the RequestNext's CurrentSeqNr (without
	// chunking, the job's sequence number), as a producer that restarts
	// after a crash must, to go on where the durable queue left off.
	BySeqNr bool
	// First is the number of the first job (0: 1).
	First int
	// Connect, when set, starts the flow instead of ProducerStart to the
	// producer controller: for work pulling and sharding, whose Start and
	// RequestNext differ (see workPullingConnect and shardingConnect).
	Connect func(ctx *runtime.Context[ProdMsg])
	// Entity, with sharding, names the entity of each job.
	Entity func(j Job) string
}

// WorkPullingConnect starts a testProducer with a work-pulling producer
// controller: its RequestNext carries the same refs as point to point's.
func WorkPullingConnect(wp runtime.Ref[workpulling.Command[Job]]) func(ctx *runtime.Context[ProdMsg]) {
	return func(ctx *runtime.Context[ProdMsg]) {
		wp.Tell(workpulling.Start[Job]{Producer: runtime.MessageAdapter(ctx, func(r workpulling.RequestNext[Job]) ProdMsg {
			return ProdMsg{next: &delivery.RequestNext[Job]{SendNextTo: r.SendNextTo, AskNextTo: r.AskNextTo}}
		})})
	}
}

// ShardingConnect starts a testProducer with a sharding producer controller.
func ShardingConnect(sp runtime.Ref[sharding.Command[Job]]) func(ctx *runtime.Context[ProdMsg]) {
	return func(ctx *runtime.Context[ProdMsg]) {
		sp.Tell(sharding.Start[Job]{Producer: runtime.MessageAdapter(ctx, func(r sharding.RequestNext[Job]) ProdMsg {
			return ProdMsg{snext: &r}
		})})
	}
}

// SpawnProducer spawns a producer that sends jobs to pc as RequestNexts allow.
func SpawnProducer(t testing.TB, sys *runtime.System, name string, pc runtime.Ref[delivery.ProducerCommand[Job]], spec ProducerSpec) runtime.Ref[ProdMsg] {
	t.Helper()
	ref, err := runtime.Spawn(sys, name, func() runtime.Behavior[ProdMsg] {
		sent := max(spec.First, 1) - 1
		var next *delivery.RequestNext[Job]
		var snext *sharding.RequestNext[Job]
		send := func(ctx *runtime.Context[ProdMsg]) {
			n, sn := next, snext
			next, snext = nil, nil
			sent++
			j := Job{N: sent, Pad: spec.Pad}
			adapt := func(s delivery.SeqNr, err error) ProdMsg { return ProdMsg{reply: s, err: err, job: j.N} }
			switch {
			case sn != nil:
				id := spec.Entity(j)
				if !spec.Ask {
					sn.SendNextTo.Tell(sharding.Envelope[Job]{EntityID: id, Message: j})
					return
				}
				runtime.AskFrom(ctx, sn.AskNextTo, WaitLimit,
					func(r runtime.Ref[delivery.SeqNr]) sharding.MessageWithConfirmation[Job] {
						return sharding.MessageWithConfirmation[Job]{EntityID: id, Message: j, ReplyTo: r}
					}, adapt)
				return
			case spec.BySeqNr:
				j.N = int(n.CurrentSeqNr)
				adapt = func(s delivery.SeqNr, err error) ProdMsg { return ProdMsg{reply: s, err: err, job: j.N} }
			}
			if !spec.Ask {
				n.SendNextTo.Tell(j)
				return
			}
			runtime.AskFrom(ctx, n.AskNextTo, WaitLimit,
				func(r runtime.Ref[delivery.SeqNr]) delivery.MessageWithConfirmation[Job] {
					return delivery.MessageWithConfirmation[Job]{Message: j, ReplyTo: r}
				}, adapt)
		}
		return runtime.Funcs[ProdMsg]{
			Signal: func(ctx *runtime.Context[ProdMsg], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					if spec.Connect != nil {
						spec.Connect(ctx)
						return
					}
					pc.Tell(delivery.ProducerStart[Job]{Producer: runtime.MessageAdapter(ctx, func(r delivery.RequestNext[Job]) ProdMsg { return ProdMsg{next: &r} })})
				}
			},
			Message: func(ctx *runtime.Context[ProdMsg], m ProdMsg) {
				switch {
				case m.next != nil || m.snext != nil:
					if spec.Limit > 0 && (sent >= spec.Limit || spec.BySeqNr && int(m.next.CurrentSeqNr) > spec.Limit) {
						return
					}
					next, snext = m.next, m.snext
					if spec.Delay != nil {
						if d := spec.Delay(); d > 0 {
							ctx.Timers().StartSingle("send", ProdMsg{send: true}, d)
							return
						}
					}
					send(ctx)
				case m.send:
					if next != nil || snext != nil {
						send(ctx)
					}
				case m.err != nil:
					t.Errorf("ask failed: %v", m.err)
				default:
					if spec.Replies != nil {
						spec.Replies <- m.reply
					}
					if spec.accepted != nil {
						spec.accepted <- m.job
					}
				}
			},
		}
	})
	if err != nil {
		t.Fatalf("spawn producer: %v", err)
	}
	return ref
}

// ConsMsg is the protocol of testConsumer: a Delivery, or a timer that says
// to confirm now.
type ConsMsg struct {
	d       delivery.Delivery[Job]
	confirm bool
	pending int // with confirm: which delayed Delivery to confirm
}

// ConsumerSpec describes a testConsumer.
type ConsumerSpec struct {
	Delay func() time.Duration // wait before confirming each job; nil: none
	// Hold, when set, is asked about every Delivery and again every
	// millisecond while it says true: the consumer keeps the job
	// unconfirmed until then (see holdGate).
	Hold func(d delivery.Delivery[Job]) bool
	// Drop, when set, is asked about every Delivery: true loses it (no
	// confirmation), as a consumer that failed while handling it would.
	Drop func(d delivery.Delivery[Job]) bool
	// Started makes the consumer send ConsumerStart in its Started signal
	// (again after a restart), as consumers should.
	Started bool
}

// Collector records what testConsumers were delivered; several consumers
// (workers, entities) may share one.
type Collector struct {
	Mu    sync.Mutex
	got   []delivery.Delivery[Job]
	want  int           // close done when a job numbered at least want arrives
	all   bool          // close done instead when every job 1..want has arrived
	Seen  map[int]int   // deliveries of each job
	done  chan struct{} // closed then
	event chan delivery.Delivery[Job]
}

// NewCollector makes a collector that is done once a job numbered want or
// higher arrives: what point-to-point delivery, in order, promises.
func NewCollector(want int) *Collector {
	return &Collector{want: want, Seen: make(map[int]int), done: make(chan struct{}), event: make(chan delivery.Delivery[Job], 1<<16)}
}

// NewCollectorAll makes a collector that is done once every job 1..n has
// arrived, in any order: what work pulling and sharding promise.
func NewCollectorAll(n int) *Collector {
	c := NewCollector(n)
	c.all = true
	return c
}

func (c *Collector) add(d delivery.Delivery[Job]) {
	c.Mu.Lock()
	c.got = append(c.got, d)
	if d.Message.N >= 1 && d.Message.N <= c.want {
		c.Seen[d.Message.N]++
	}
	reached := c.want > 0 && d.Message.N >= c.want
	if c.all {
		reached = len(c.Seen) == c.want
	}
	c.Mu.Unlock()
	select {
	case c.event <- d:
	default:
	}
	if reached {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
}

// Jobs returns the job numbers delivered so far, in order.
func (c *Collector) Jobs() []int {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	out := make([]int, len(c.got))
	for i, d := range c.got {
		out[i] = d.Message.N
	}
	return out
}

// Deliveries returns what was delivered so far, in order.
func (c *Collector) Deliveries() []delivery.Delivery[Job] {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return append([]delivery.Delivery[Job](nil), c.got...)
}

// Want is the number of the last job wanted.
func (c *Collector) Want() int { return c.want }

// Distinct is the number of different jobs 1..want delivered so far.
func (c *Collector) Distinct() int {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return len(c.Seen)
}

// Count is the number of deliveries so far, repeats included.
func (c *Collector) Count() int {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return len(c.got)
}

// Wait waits until the wanted job arrives or the limit passes.
func (c *Collector) Wait(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		if c.all {
			return fmt.Errorf("%d of jobs 1..%d delivered (%d deliveries so far): %w", c.Distinct(), c.want, c.Count(), ctx.Err())
		}
		return fmt.Errorf("job %d not delivered (%d deliveries so far): %w", c.want, c.Count(), ctx.Err())
	}
}

// SpawnConsumer spawns a consumer that confirms every Delivery from cc, and
// starts cc with it.
func SpawnConsumer(t testing.TB, sys *runtime.System, name string, cc runtime.Ref[delivery.ConsumerCommand[Job]], spec ConsumerSpec, col *Collector) runtime.Ref[ConsMsg] {
	t.Helper()
	ref, err := runtime.Spawn(sys, name, func() runtime.Behavior[ConsMsg] {
		return ConsumerBehavior(spec, col, func(s delivery.ConsumerStart[Job]) { cc.Tell(s) })
	})
	if err != nil {
		t.Fatalf("spawn consumer: %v", err)
	}
	if !spec.Started {
		ref.Tell(ConsMsg{})
	}
	return ref
}

// ConsumerBehavior is the behavior of a consumer that confirms every Delivery
// it gets, and records it in col. It starts its consumer controller by
// calling start (in its Started signal with spec.started, else when the
// test sends it a zero consMsg).
func ConsumerBehavior(spec ConsumerSpec, col *Collector, start func(delivery.ConsumerStart[Job])) runtime.Behavior[ConsMsg] {
	// A consumer may have several Deliveries outstanding, one from each
	// consumer controller delivering to it (a sharded entity hears from
	// every producer, and from the old and the new controller of one
	// producer while they hand over): each is confirmed on its own.
	pending := make(map[int]delivery.Delivery[Job])
	nextPending := 0
	doStart := func(ctx *runtime.Context[ConsMsg]) {
		start(delivery.ConsumerStart[Job]{DeliverTo: runtime.MessageAdapter(ctx, func(d delivery.Delivery[Job]) ConsMsg { return ConsMsg{d: d} })})
	}
	return runtime.Funcs[ConsMsg]{
		Signal: func(ctx *runtime.Context[ConsMsg], s runtime.Signal) {
			if _, ok := s.(runtime.Started); ok && spec.Started {
				doStart(ctx)
			}
		},
		Message: func(ctx *runtime.Context[ConsMsg], m ConsMsg) {
			if m.confirm {
				d := pending[m.pending]
				if spec.Hold != nil && spec.Hold(d) {
					ctx.Timers().StartSingle(fmt.Sprintf("confirm-%d", m.pending), m, time.Millisecond)
					return
				}
				delete(pending, m.pending)
				d.Confirm()
				return
			}
			if m.d.ConfirmTo == nil { // the test's signal to start
				doStart(ctx)
				return
			}
			if spec.Drop != nil && spec.Drop(m.d) {
				return
			}
			var wait time.Duration
			if spec.Delay != nil {
				wait = spec.Delay()
			}
			if spec.Hold != nil && spec.Hold(m.d) {
				wait = max(wait, time.Millisecond)
			}
			if wait > 0 {
				// The timer first: a test that sees the delivery in col
				// may advance a fake clock at once.
				nextPending++
				pending[nextPending] = m.d
				ctx.Timers().StartSingle(fmt.Sprintf("confirm-%d", nextPending), ConsMsg{confirm: true, pending: nextPending}, wait)
				col.add(m.d)
				return
			}
			col.add(m.d)
			m.d.Confirm()
		},
	}
}
