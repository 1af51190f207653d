package delivery_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// newHandle makes a Producer handle and, unless noConsumer, a consumer
// controller and a consumer that collects what arrives.
func newHandle(t *testing.T, sys *runtime.System, want int, noConsumer bool, opts ...delivery.ProducerOption[deliverytest.Job]) (*delivery.Producer[deliverytest.Job], *deliverytest.Collector) {
	t.Helper()
	p, err := delivery.NewProducer[deliverytest.Job](sys, "pc", "handle", delivery.ProducerSettings{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	col := deliverytest.NewCollectorAll(want)
	if noConsumer {
		return p, col
	}
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", delivery.ConsumerSettings{FlowControlWindow: 4})
	if err != nil {
		t.Fatal(err)
	}
	deliverytest.SpawnConsumer(t, sys, "consumer", cc, deliverytest.ConsumerSpec{Started: true}, col)
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: p.Controller()})
	return p, col
}

// TestProducerSend: concurrent Sends from plain goroutines, more than the
// window, each wait for demand and return their own sequence number; every
// job arrives once. With a durable queue, Send returns once the message is
// stored.
func TestProducerSend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue durable.Queue[deliverytest.Job]
	}{{"without a durable queue", nil}, {"with a durable queue", durable.NewMemory[deliverytest.Job]()}} {
		t.Run(tc.name, func(t *testing.T) {
			const jobs = 200
			sys, _ := deliverytest.NewSystem(t)
			var opts []delivery.ProducerOption[deliverytest.Job]
			if tc.queue != nil {
				opts = append(opts, delivery.WithDurableQueue(tc.queue))
			}
			p, col := newHandle(t, sys, jobs, false, opts...)
			seqNrs := make([]delivery.SeqNr, jobs)
			var wg sync.WaitGroup
			for i := range jobs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n, err := p.Send(t.Context(), deliverytest.Job{N: i + 1})
					if err != nil {
						t.Errorf("send %d: %v", i+1, err)
						return
					}
					if tc.queue != nil {
						s, err := tc.queue.LoadState(context.Background())
						if err != nil || s.CurrentSeqNr <= n {
							t.Errorf("send %d returned seqNr %d before it was stored (queue current %d, %v)", i+1, n, s.CurrentSeqNr, err)
						}
					}
					seqNrs[i] = n
				}()
			}
			wg.Wait()
			if err := col.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			slices.Sort(seqNrs)
			for i, n := range seqNrs {
				if n != delivery.SeqNr(i+1) {
					t.Fatalf("sequence numbers %v, want 1..%d each once", seqNrs, jobs)
				}
			}
			if col.Count() != jobs {
				t.Fatalf("%d deliveries of %d jobs", col.Count(), jobs)
			}
		})
	}
}

// TestProducerSendWithoutDemand: a Send that finds no demand before its
// context ends says it was not sent, and is not sent later.
func TestProducerSendWithoutDemand(t *testing.T) {
	sys, _ := deliverytest.NewSystem(t)
	p, _ := newHandle(t, sys, 1, true)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Send(ctx, deliverytest.Job{N: 1}); !errors.Is(err, context.Canceled) || !errors.Is(err, delivery.ErrNotSent) {
		t.Fatalf("send without demand: %v, want context.Canceled and ErrNotSent", err)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("Err while the controller runs: %v", err)
	}
}

// TestProducerStopped: once the controller failed, Err says so and Send
// returns at once with ErrProducerStopped.
func TestProducerStopped(t *testing.T) {
	sys, _ := deliverytest.NewSystem(t)
	p, _ := newHandle(t, sys, 1, true, delivery.WithDurableQueue[deliverytest.Job](panickingQueue{Queue: durable.NewMemory[deliverytest.Job](), panics: map[string]bool{"load": true}}))
	testenv.Recv(t, p.Done(), deliverytest.WaitLimit)
	if err := p.Err(); !errors.Is(err, delivery.ErrProducerStopped) {
		t.Fatalf("Err: %v, want ErrProducerStopped", err)
	}
	if _, err := p.Send(t.Context(), deliverytest.Job{N: 1}); !errors.Is(err, delivery.ErrProducerStopped) {
		t.Fatalf("send: %v, want ErrProducerStopped", err)
	}
}
