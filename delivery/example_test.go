package delivery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/runtime"
)

// Job is the message of the examples.
type Job struct{ ID int }

// quiet keeps the controllers' logs (dead letters at shutdown, say) out of
// the examples' output.
var quiet = runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// Point to point in tell mode: the producer sends a job each time it is
// allowed to, the consumer confirms each one, and the jobs arrive in order.
func ExampleSpawnProducerController() {
	const jobs = 3
	sys := runtime.NewSystem("p2p", quiet)
	defer sys.Shutdown(context.Background())

	pc, err := delivery.SpawnProducerController[Job](sys, "jobs-pc", "jobs", delivery.ProducerSettings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cc, err := delivery.SpawnConsumerController[Job](sys, "jobs-cc", delivery.ConsumerSettings{})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The producer may send exactly one job per RequestNext: that is the
	// flow control that keeps it from flooding the consumer.
	producer, err := runtime.Spawn(sys, "producer", func() runtime.Behavior[delivery.RequestNext[Job]] {
		sent := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.RequestNext[Job]], next delivery.RequestNext[Job]) {
			if sent < jobs {
				sent++
				next.SendNextTo.Tell(Job{ID: sent})
			}
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	done := make(chan struct{})
	consumer, err := runtime.Spawn(sys, "consumer", func() runtime.Behavior[delivery.Delivery[Job]] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.Delivery[Job]], d delivery.Delivery[Job]) {
			fmt.Printf("job %d (seqNr %d)\n", d.Message.ID, d.SeqNr)
			// Confirm only once the job is processed: the next Delivery
			// comes only then, and an unconfirmed one is delivered again.
			d.Confirm()
			if d.Message.ID == jobs {
				close(done)
			}
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Producer and consumer must be actors of the controllers' own System
	// (else the controller stops with an error wrapping ErrNotLocal).
	cc.Tell(delivery.ConsumerStart[Job]{DeliverTo: consumer})
	cc.Tell(delivery.RegisterToProducerController[Job]{ProducerController: pc})
	pc.Tell(delivery.ProducerStart[Job]{Producer: producer})

	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output:
	// job 1 (seqNr 1)
	// job 2 (seqNr 2)
	// job 3 (seqNr 3)
}

// askMsg is the protocol of the asking producer: a RequestNext, or the
// reply to one of its asks.
type askMsg struct {
	next  *delivery.RequestNext[Job]
	seqNr delivery.SeqNr
	err   error
}

// Point to point in ask mode: the producer sends each job wrapped in a
// MessageWithConfirmation and gets its sequence number back once the
// consumer has confirmed it.
func ExampleMessageWithConfirmation() {
	const jobs = 3
	sys := runtime.NewSystem("p2p-ask", quiet)
	defer sys.Shutdown(context.Background())

	pc, err := delivery.SpawnProducerController[Job](sys, "jobs-pc", "jobs", delivery.ProducerSettings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cc, err := delivery.SpawnConsumerController[Job](sys, "jobs-cc", delivery.ConsumerSettings{})
	if err != nil {
		fmt.Println(err)
		return
	}

	done := make(chan struct{})
	_, err = runtime.Spawn(sys, "producer", func() runtime.Behavior[askMsg] {
		sent, confirmed := 0, 0
		return runtime.Funcs[askMsg]{
			// The adapter lets one actor take both RequestNext and the ask
			// replies; starting from Started registers it again after a
			// restart.
			Signal: func(ctx *runtime.Context[askMsg], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					pc.Tell(delivery.ProducerStart[Job]{Producer: runtime.MessageAdapter(ctx,
						func(n delivery.RequestNext[Job]) askMsg { return askMsg{next: &n} })})
				}
			},
			Message: func(ctx *runtime.Context[askMsg], m askMsg) {
				switch {
				case m.next != nil && sent < jobs:
					sent++
					job := Job{ID: sent}
					// AskFrom does not block the actor: the reply, or
					// ErrAskTimeout, comes back as a message.
					runtime.AskFrom(ctx, m.next.AskNextTo, 10*time.Second,
						func(r runtime.Ref[delivery.SeqNr]) delivery.MessageWithConfirmation[Job] {
							return delivery.MessageWithConfirmation[Job]{Message: job, ReplyTo: r}
						},
						func(s delivery.SeqNr, err error) askMsg { return askMsg{seqNr: s, err: err} })
				case m.err != nil:
					fmt.Println("ask failed:", m.err)
				case m.seqNr > 0:
					fmt.Println("confirmed seqNr", m.seqNr)
					if confirmed++; confirmed == jobs {
						close(done)
					}
				}
			},
		}
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	consumer, err := runtime.Spawn(sys, "consumer", func() runtime.Behavior[delivery.Delivery[Job]] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.Delivery[Job]], d delivery.Delivery[Job]) {
			d.Confirm() // this is what answers the producer's ask
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	cc.Tell(delivery.ConsumerStart[Job]{DeliverTo: consumer})
	// The producer side may connect too: RegisterConsumer to the producer
	// controller instead of RegisterToProducerController.
	pc.Tell(delivery.RegisterConsumer[Job]{ConsumerController: cc})

	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output:
	// confirmed seqNr 1
	// confirmed seqNr 2
	// confirmed seqNr 3
}

// A durable producer queue: the producer controller stores each job before
// it sends it, so a new controller with the same producer id sends again
// every job that was not confirmed. durable.NewMemory keeps the queue in
// memory, which outlives a controller or a System but not the process: it
// is for tests. delivery/redisqueue keeps it in Redis, which survives a
// kill -9 of the producer's process.
func ExampleWithDurableQueue() {
	queue := durable.NewMemory[Job]()

	// First run: three jobs are stored, but the consumer never starts, so
	// none is confirmed when this System goes down.
	before := runtime.NewSystem("before", quiet)
	pc, err := delivery.SpawnProducerController(before, "jobs-pc", "jobs", delivery.ProducerSettings{},
		delivery.WithDurableQueue[Job](queue))
	if err != nil {
		fmt.Println(err)
		return
	}
	cc, err := delivery.SpawnConsumerController[Job](before, "jobs-cc", delivery.ConsumerSettings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	allStored := make(chan struct{})
	// With a durable queue an ask is answered once the job is stored, not
	// once it is confirmed.
	stored, err := runtime.Spawn(before, "stored", func() runtime.Behavior[delivery.SeqNr] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.SeqNr], s delivery.SeqNr) {
			fmt.Println("stored seqNr", s)
			if s == 3 {
				close(allStored)
			}
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	producer, err := runtime.Spawn(before, "producer", func() runtime.Behavior[delivery.RequestNext[Job]] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.RequestNext[Job]], next delivery.RequestNext[Job]) {
			if next.CurrentSeqNr <= 3 {
				next.AskNextTo.Tell(delivery.MessageWithConfirmation[Job]{
					Message: Job{ID: int(next.CurrentSeqNr)}, ReplyTo: stored})
			}
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	cc.Tell(delivery.RegisterToProducerController[Job]{ProducerController: pc})
	pc.Tell(delivery.ProducerStart[Job]{Producer: producer})
	select {
	case <-allStored:
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	if err := before.Shutdown(context.Background()); err != nil {
		fmt.Println(err)
		return
	}

	// Second run: the same producer id on the same queue. The stored jobs
	// come first, with their old sequence numbers; the producer goes on
	// from RequestNext.CurrentSeqNr, where the queue left off.
	after := runtime.NewSystem("after", quiet)
	defer after.Shutdown(context.Background())
	pc, err = delivery.SpawnProducerController(after, "jobs-pc", "jobs", delivery.ProducerSettings{},
		delivery.WithDurableQueue[Job](queue))
	if err != nil {
		fmt.Println(err)
		return
	}
	cc, err = delivery.SpawnConsumerController[Job](after, "jobs-cc", delivery.ConsumerSettings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	producer, err = runtime.Spawn(after, "producer", func() runtime.Behavior[delivery.RequestNext[Job]] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.RequestNext[Job]], next delivery.RequestNext[Job]) {
			if next.CurrentSeqNr == 4 {
				next.SendNextTo.Tell(Job{ID: int(next.CurrentSeqNr)})
			}
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan struct{})
	consumer, err := runtime.Spawn(after, "consumer", func() runtime.Behavior[delivery.Delivery[Job]] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.Delivery[Job]], d delivery.Delivery[Job]) {
			fmt.Printf("job %d (seqNr %d)\n", d.Message.ID, d.SeqNr)
			d.Confirm()
			if d.Message.ID == 4 {
				close(done)
			}
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	cc.Tell(delivery.ConsumerStart[Job]{DeliverTo: consumer})
	cc.Tell(delivery.RegisterToProducerController[Job]{ProducerController: pc})
	pc.Tell(delivery.ProducerStart[Job]{Producer: producer})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output:
	// stored seqNr 1
	// stored seqNr 2
	// stored seqNr 3
	// job 1 (seqNr 1)
	// job 2 (seqNr 2)
	// job 3 (seqNr 3)
	// job 4 (seqNr 4)
}
