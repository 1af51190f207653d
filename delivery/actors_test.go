package delivery

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/runtime"
)

// job is the message of most tests.
type job struct {
	N   int    `json:"n"`
	Pad string `json:"pad,omitempty"`
}

// prodMsg is the protocol of testProducer: a RequestNext (of point to
// point or work pulling, or of sharding), a timer that says to send now, or
// an ask's reply.
type prodMsg struct {
	next  *RequestNext[job]
	snext *ShardingRequestNext[job]
	send  bool
	reply SeqNr
	job   int // the job an ask's reply is for
	err   error
}

// producerSpec describes a testProducer.
type producerSpec struct {
	limit    int                  // jobs to send, numbered 1..limit; 0: no limit
	ask      bool                 // send with MessageWithConfirmation and report the replies
	pad      string               // padding of every job, to make it large
	delay    func() time.Duration // wait before sending each job; nil: none
	replies  chan<- SeqNr         // with ask: every reply
	accepted chan<- int           // with ask: the number of every job replied to
	// bySeqNr numbers each job with the RequestNext's CurrentSeqNr (without
	// chunking, the job's sequence number), as a producer that restarts
	// after a crash must, to go on where the durable queue left off.
	bySeqNr bool
	// first is the number of the first job (0: 1).
	first int
	// connect, when set, starts the flow instead of ProducerStart to the
	// producer controller: for work pulling and sharding, whose Start and
	// RequestNext differ (see workPullingConnect and shardingConnect).
	connect func(ctx *runtime.Context[prodMsg])
	// entity, with sharding, names the entity of each job.
	entity func(j job) string
}

// workPullingConnect starts a testProducer with a work-pulling producer
// controller: its RequestNext carries the same refs as point to point's.
func workPullingConnect(wp runtime.Ref[WorkPullingCommand[job]]) func(ctx *runtime.Context[prodMsg]) {
	return func(ctx *runtime.Context[prodMsg]) {
		wp.Tell(WorkPullingStart[job]{Producer: runtime.MessageAdapter(ctx, func(r WorkPullingRequestNext[job]) prodMsg {
			return prodMsg{next: &RequestNext[job]{SendNextTo: r.SendNextTo, AskNextTo: r.AskNextTo}}
		})})
	}
}

// shardingConnect starts a testProducer with a sharding producer controller.
func shardingConnect(sp runtime.Ref[ShardingCommand[job]]) func(ctx *runtime.Context[prodMsg]) {
	return func(ctx *runtime.Context[prodMsg]) {
		sp.Tell(ShardingStart[job]{Producer: runtime.MessageAdapter(ctx, func(r ShardingRequestNext[job]) prodMsg {
			return prodMsg{snext: &r}
		})})
	}
}

// spawnProducer spawns a producer that sends jobs to pc as RequestNexts allow.
func spawnProducer(t testing.TB, sys *runtime.System, name string, pc runtime.Ref[ProducerCommand[job]], spec producerSpec) runtime.Ref[prodMsg] {
	t.Helper()
	ref, err := runtime.Spawn(sys, name, func() runtime.Behavior[prodMsg] {
		sent := max(spec.first, 1) - 1
		var next *RequestNext[job]
		var snext *ShardingRequestNext[job]
		send := func(ctx *runtime.Context[prodMsg]) {
			n, sn := next, snext
			next, snext = nil, nil
			sent++
			j := job{N: sent, Pad: spec.pad}
			adapt := func(s SeqNr, err error) prodMsg { return prodMsg{reply: s, err: err, job: j.N} }
			switch {
			case sn != nil:
				id := spec.entity(j)
				if !spec.ask {
					sn.SendNextTo.Tell(ShardingEnvelope[job]{EntityID: id, Message: j})
					return
				}
				runtime.AskFrom(ctx, sn.AskNextTo, waitLimit,
					func(r runtime.Ref[SeqNr]) ShardingMessageWithConfirmation[job] {
						return ShardingMessageWithConfirmation[job]{EntityID: id, Message: j, ReplyTo: r}
					}, adapt)
				return
			case spec.bySeqNr:
				j.N = int(n.CurrentSeqNr)
				adapt = func(s SeqNr, err error) prodMsg { return prodMsg{reply: s, err: err, job: j.N} }
			}
			if !spec.ask {
				n.SendNextTo.Tell(j)
				return
			}
			runtime.AskFrom(ctx, n.AskNextTo, waitLimit,
				func(r runtime.Ref[SeqNr]) MessageWithConfirmation[job] {
					return MessageWithConfirmation[job]{Message: j, ReplyTo: r}
				}, adapt)
		}
		return runtime.Funcs[prodMsg]{
			Signal: func(ctx *runtime.Context[prodMsg], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					if spec.connect != nil {
						spec.connect(ctx)
						return
					}
					pc.Tell(ProducerStart[job]{Producer: runtime.MessageAdapter(ctx, func(r RequestNext[job]) prodMsg { return prodMsg{next: &r} })})
				}
			},
			Message: func(ctx *runtime.Context[prodMsg], m prodMsg) {
				switch {
				case m.next != nil || m.snext != nil:
					if spec.limit > 0 && (sent >= spec.limit || spec.bySeqNr && int(m.next.CurrentSeqNr) > spec.limit) {
						return
					}
					next, snext = m.next, m.snext
					if spec.delay != nil {
						if d := spec.delay(); d > 0 {
							ctx.Timers().StartSingle("send", prodMsg{send: true}, d)
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
					if spec.replies != nil {
						spec.replies <- m.reply
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

// consMsg is the protocol of testConsumer: a Delivery, or a timer that says
// to confirm now.
type consMsg struct {
	d       Delivery[job]
	confirm bool
	pending int // with confirm: which delayed Delivery to confirm
}

// consumerSpec describes a testConsumer.
type consumerSpec struct {
	delay func() time.Duration // wait before confirming each job; nil: none
	// hold, when set, is asked about every Delivery and again every
	// millisecond while it says true: the consumer keeps the job
	// unconfirmed until then (see holdGate).
	hold func(d Delivery[job]) bool
	// drop, when set, is asked about every Delivery: true loses it (no
	// confirmation), as a consumer that failed while handling it would.
	drop func(d Delivery[job]) bool
	// started makes the consumer send ConsumerStart in its Started signal
	// (again after a restart), as consumers should.
	started bool
}

// collector records what testConsumers were delivered; several consumers
// (workers, entities) may share one.
type collector struct {
	mu    sync.Mutex
	got   []Delivery[job]
	want  int           // close done when a job numbered at least want arrives
	all   bool          // close done instead when every job 1..want has arrived
	seen  map[int]int   // deliveries of each job
	done  chan struct{} // closed then
	event chan Delivery[job]
}

func newCollector(want int) *collector {
	return &collector{want: want, seen: make(map[int]int), done: make(chan struct{}), event: make(chan Delivery[job], 1<<16)}
}

// newCollectorAll makes a collector that is done once every job 1..n has
// arrived, in any order: what work pulling and sharding promise.
func newCollectorAll(n int) *collector {
	c := newCollector(n)
	c.all = true
	return c
}

func (c *collector) add(d Delivery[job]) {
	c.mu.Lock()
	c.got = append(c.got, d)
	if d.Message.N >= 1 && d.Message.N <= c.want {
		c.seen[d.Message.N]++
	}
	reached := c.want > 0 && d.Message.N >= c.want
	if c.all {
		reached = len(c.seen) == c.want
	}
	c.mu.Unlock()
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

// jobs returns the job numbers delivered so far, in order.
func (c *collector) jobs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, len(c.got))
	for i, d := range c.got {
		out[i] = d.Message.N
	}
	return out
}

// deliveries returns what was delivered so far, in order.
func (c *collector) deliveries() []Delivery[job] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Delivery[job](nil), c.got...)
}

// distinct is the number of different jobs 1..want delivered so far.
func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// wait waits until the wanted job arrives or the limit passes.
func (c *collector) wait(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		if c.all {
			return fmt.Errorf("%d of jobs 1..%d delivered (%d deliveries so far): %w", c.distinct(), c.want, c.count(), ctx.Err())
		}
		return fmt.Errorf("job %d not delivered (%d deliveries so far): %w", c.want, c.count(), ctx.Err())
	}
}

// spawnConsumer spawns a consumer that confirms every Delivery from cc, and
// starts cc with it.
func spawnConsumer(t testing.TB, sys *runtime.System, name string, cc runtime.Ref[ConsumerCommand[job]], spec consumerSpec, col *collector) runtime.Ref[consMsg] {
	t.Helper()
	ref, err := runtime.Spawn(sys, name, func() runtime.Behavior[consMsg] {
		return testConsumer(spec, col, func(s ConsumerStart[job]) { cc.Tell(s) })
	})
	if err != nil {
		t.Fatalf("spawn consumer: %v", err)
	}
	if !spec.started {
		ref.Tell(consMsg{})
	}
	return ref
}

// testConsumer is the behavior of a consumer that confirms every Delivery
// it gets, and records it in col. It starts its consumer controller by
// calling start (in its Started signal with spec.started, else when the
// test sends it a zero consMsg).
func testConsumer(spec consumerSpec, col *collector, start func(ConsumerStart[job])) runtime.Behavior[consMsg] {
	// A consumer may have several Deliveries outstanding, one from each
	// consumer controller delivering to it (a sharded entity hears from
	// every producer, and from the old and the new controller of one
	// producer while they hand over): each is confirmed on its own.
	pending := make(map[int]Delivery[job])
	nextPending := 0
	doStart := func(ctx *runtime.Context[consMsg]) {
		start(ConsumerStart[job]{DeliverTo: runtime.MessageAdapter(ctx, func(d Delivery[job]) consMsg { return consMsg{d: d} })})
	}
	return runtime.Funcs[consMsg]{
		Signal: func(ctx *runtime.Context[consMsg], s runtime.Signal) {
			if _, ok := s.(runtime.Started); ok && spec.started {
				doStart(ctx)
			}
		},
		Message: func(ctx *runtime.Context[consMsg], m consMsg) {
			if m.confirm {
				d := pending[m.pending]
				if spec.hold != nil && spec.hold(d) {
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
			if spec.drop != nil && spec.drop(m.d) {
				return
			}
			var wait time.Duration
			if spec.delay != nil {
				wait = spec.delay()
			}
			if spec.hold != nil && spec.hold(m.d) {
				wait = max(wait, time.Millisecond)
			}
			if wait > 0 {
				// The timer first: a test that sees the delivery in col
				// may advance a fake clock at once.
				nextPending++
				pending[nextPending] = m.d
				ctx.Timers().StartSingle(fmt.Sprintf("confirm-%d", nextPending), consMsg{confirm: true, pending: nextPending}, wait)
				col.add(m.d)
				return
			}
			col.add(m.d)
			m.d.Confirm()
		},
	}
}
