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

// prodMsg is the protocol of testProducer: a RequestNext, a timer that
// says to send now, or an ask's reply.
type prodMsg struct {
	next  *RequestNext[job]
	send  bool
	reply SeqNr
	err   error
}

// producerSpec describes a testProducer.
type producerSpec struct {
	limit   int                  // jobs to send, numbered 1..limit; 0: no limit
	ask     bool                 // send with MessageWithConfirmation and report the replies
	pad     string               // padding of every job, to make it large
	delay   func() time.Duration // wait before sending each job; nil: none
	replies chan<- SeqNr         // with ask: every reply
	// bySeqNr numbers each job with the RequestNext's CurrentSeqNr (without
	// chunking, the job's sequence number), as a producer that restarts
	// after a crash must, to go on where the durable queue left off.
	bySeqNr bool
}

// spawnProducer spawns a producer that sends jobs to pc as RequestNexts allow.
func spawnProducer(t testing.TB, sys *runtime.System, name string, pc runtime.Ref[ProducerCommand[job]], spec producerSpec) runtime.Ref[prodMsg] {
	t.Helper()
	ref, err := runtime.Spawn(sys, name, func() runtime.Behavior[prodMsg] {
		sent := 0
		var next *RequestNext[job]
		send := func(ctx *runtime.Context[prodMsg]) {
			n := next
			next = nil
			sent++
			j := job{N: sent, Pad: spec.pad}
			if spec.bySeqNr {
				j.N = int(n.CurrentSeqNr)
			}
			if !spec.ask {
				n.SendNextTo.Tell(j)
				return
			}
			runtime.AskFrom(ctx, n.AskNextTo, waitLimit,
				func(r runtime.Ref[SeqNr]) MessageWithConfirmation[job] {
					return MessageWithConfirmation[job]{Message: j, ReplyTo: r}
				},
				func(s SeqNr, err error) prodMsg { return prodMsg{reply: s, err: err} })
		}
		return runtime.Funcs[prodMsg]{
			Signal: func(ctx *runtime.Context[prodMsg], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					pc.Tell(ProducerStart[job]{Producer: runtime.MessageAdapter(ctx, func(r RequestNext[job]) prodMsg { return prodMsg{next: &r} })})
				}
			},
			Message: func(ctx *runtime.Context[prodMsg], m prodMsg) {
				switch {
				case m.next != nil:
					if spec.limit > 0 && (sent >= spec.limit || spec.bySeqNr && int(m.next.CurrentSeqNr) > spec.limit) {
						return
					}
					next = m.next
					if spec.delay != nil {
						if d := spec.delay(); d > 0 {
							ctx.Timers().StartSingle("send", prodMsg{send: true}, d)
							return
						}
					}
					send(ctx)
				case m.send:
					if next != nil {
						send(ctx)
					}
				case m.err != nil:
					t.Errorf("ask failed: %v", m.err)
				default:
					if spec.replies != nil {
						spec.replies <- m.reply
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
}

// consumerSpec describes a testConsumer.
type consumerSpec struct {
	delay func() time.Duration // wait before confirming each job; nil: none
	// drop, when set, is asked about every Delivery: true loses it (no
	// confirmation), as a consumer that failed while handling it would.
	drop func(d Delivery[job]) bool
	// started makes the consumer send ConsumerStart in its Started signal
	// (again after a restart), as consumers should.
	started bool
}

// collector records what a testConsumer was delivered.
type collector struct {
	mu    sync.Mutex
	got   []Delivery[job]
	want  int           // close done when a job numbered at least want arrives
	done  chan struct{} // closed then
	event chan Delivery[job]
}

func newCollector(want int) *collector {
	return &collector{want: want, done: make(chan struct{}), event: make(chan Delivery[job], 1<<16)}
}

func (c *collector) add(d Delivery[job]) {
	c.mu.Lock()
	c.got = append(c.got, d)
	reached := c.want > 0 && d.Message.N >= c.want && len(c.got) > 0
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
		return fmt.Errorf("job %d not delivered (%d deliveries so far): %w", c.want, c.count(), ctx.Err())
	}
}

// spawnConsumer spawns a consumer that confirms every Delivery from cc, and
// starts cc with it.
func spawnConsumer(t testing.TB, sys *runtime.System, name string, cc runtime.Ref[ConsumerCommand[job]], spec consumerSpec, col *collector) runtime.Ref[consMsg] {
	t.Helper()
	ref, err := runtime.Spawn(sys, name, func() runtime.Behavior[consMsg] {
		var pending Delivery[job]
		start := func(ctx *runtime.Context[consMsg]) {
			cc.Tell(ConsumerStart[job]{DeliverTo: runtime.MessageAdapter(ctx, func(d Delivery[job]) consMsg { return consMsg{d: d} })})
		}
		return runtime.Funcs[consMsg]{
			Signal: func(ctx *runtime.Context[consMsg], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok && spec.started {
					start(ctx)
				}
			},
			Message: func(ctx *runtime.Context[consMsg], m consMsg) {
				if m.confirm {
					pending.Confirm()
					return
				}
				if m.d.ConfirmTo == nil { // the test's signal to start
					start(ctx)
					return
				}
				if spec.drop != nil && spec.drop(m.d) {
					return
				}
				col.add(m.d)
				if spec.delay != nil {
					if d := spec.delay(); d > 0 {
						pending = m.d
						ctx.Timers().StartSingle("confirm", consMsg{confirm: true}, d)
						return
					}
				}
				m.d.Confirm()
			},
		}
	})
	if err != nil {
		t.Fatalf("spawn consumer: %v", err)
	}
	if !spec.started {
		ref.Tell(consMsg{})
	}
	return ref
}
