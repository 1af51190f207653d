package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
)

// storeJobs stores jobs from..to in q and confirms up to confirmed.
func storeJobs(t *testing.T, q durable.Queue[deliverytest.Job], from, to, confirmed delivery.SeqNr) {
	t.Helper()
	ctx := context.Background()
	for n := from; n <= to; n++ {
		if err := q.StoreMessageSent(ctx, durable.MessageSent[deliverytest.Job]{SeqNr: n, Message: deliverytest.Job{N: int(n)}}); err != nil {
			t.Fatal(err)
		}
	}
	if confirmed > 0 {
		if err := q.StoreMessageConfirmed(ctx, confirmed, durable.NoQualifier, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDurableRestartNothingUnconfirmed is the regression test of the
// reference's bug: a durable producer controller restarted with nothing
// unconfirmed must send its first message, numbered where the queue left
// off, not fail with "no demand".
func TestDurableRestartNothingUnconfirmed(t *testing.T) {
	q := durable.NewMemory[deliverytest.Job]()
	storeJobs(t, q, 1, 5, 5)
	h := newPC(t, delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	h.start()
	r := h.expectRequestNext(t, 6, 5)
	r.SendNextTo.Tell(deliverytest.Job{N: 6})
	h.expectSeq(t, 6, true)
	h.request(0, 55)
	r = h.expectRequestNext(t, 7, 5)
	r.SendNextTo.Tell(deliverytest.Job{N: 7})
	h.expectSeq(t, 7, false)
	h.request(7, 55)
	deliverytest.Eventually(t, "confirmation 7 stored", func() bool {
		s, err := q.LoadState(context.Background())
		return err == nil && s.HighestConfirmedSeqNr == 7 && len(s.Unconfirmed) == 0 && s.CurrentSeqNr == 8
	})
}

// TestDurableRestartResendsUnconfirmed: the loaded unconfirmed messages go
// out again with their sequence numbers, the head marked first, and the
// producer is asked for more only when the consumer controller asks.
func TestDurableRestartResendsUnconfirmed(t *testing.T) {
	q := durable.NewMemory[deliverytest.Job]()
	storeJobs(t, q, 1, 5, 2)
	h := newPC(t, delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	h.start()
	h.expectSeq(t, 3, true)
	h.expectSeq(t, 4, false)
	h.expectSeq(t, 5, false)
	h.producer.ExpectNone(t, 20*time.Millisecond)
	h.request(0, 52)
	h.expectRequestNext(t, 6, 2)
}

// TestDurableDropsPartialChunks: chunks of a message that was not stored
// whole are forgotten on load, and the message is stored again from its
// first chunk.
func TestDurableDropsPartialChunks(t *testing.T) {
	q := durable.NewMemory[deliverytest.Job]()
	ctx := context.Background()
	storeJobs(t, q, 1, 1, 1)
	for n, c := range []durable.Chunk{{Data: []byte(`{"n"`), First: true}, {Data: []byte(`:2`)}} {
		if err := q.StoreMessageSent(ctx, durable.MessageSent[deliverytest.Job]{SeqNr: delivery.SeqNr(n + 2), Chunk: &c}); err != nil {
			t.Fatal(err)
		}
	}
	h := newPC(t, delivery.ProducerSettings{ChunkLargeMessages: 4}, delivery.WithDurableQueue[deliverytest.Job](q))
	h.start()
	r := h.expectRequestNext(t, 2, 1)
	r.SendNextTo.Tell(deliverytest.Job{N: 2}) // {"n":2}: 2 chunks
	h.expectSeq(t, 2, true)
	h.request(0, 50)
	h.expectSeq(t, 3, false)
	h.expectRequestNext(t, 4, 1)
	s, err := q.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Unconfirmed) != 2 || !s.Unconfirmed[1].Chunk.Last || string(s.Unconfirmed[1].Chunk.Data) != `:2}` {
		t.Fatalf("stored %+v", s.Unconfirmed)
	}
}

// TestDurableAskRepliesWhenStored: with a durable queue, an ask is answered
// once the message is stored, before the consumer confirms it.
func TestDurableAskRepliesWhenStored(t *testing.T) {
	q := durable.NewMemory[deliverytest.Job]()
	h := newPC(t, delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	replies := deliverytest.NewProbe[delivery.SeqNr](t, h.sys, "replies")
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.AskNextTo.Tell(delivery.MessageWithConfirmation[deliverytest.Job]{Message: deliverytest.Job{N: 1}, ReplyTo: replies.Ref})
	if got := replies.Expect(t); got != 1 {
		t.Fatalf("reply %d, want 1", got)
	}
	h.expectSeq(t, 1, true)
}

// failingQueue fails the calls its fail function picks; blocking ones
// wait until the controller gives up on them.
type failingQueue struct {
	durable.Queue[deliverytest.Job]
	fail  func(op string) error
	block bool
}

func (f *failingQueue) StoreMessageSent(ctx context.Context, m durable.MessageSent[deliverytest.Job]) error {
	if err := f.fail("sent"); err != nil {
		if f.block {
			<-ctx.Done()
			return ctx.Err()
		}
		return err
	}
	return f.Queue.StoreMessageSent(ctx, m)
}

func (f *failingQueue) LoadState(ctx context.Context) (durable.State[deliverytest.Job], error) {
	if err := f.fail("load"); err != nil {
		return durable.State[deliverytest.Job]{}, err
	}
	return f.Queue.LoadState(ctx)
}

// TestDurableStoreKeepsFailing: a store that keeps failing (fast, or by
// timing out) is retried DurableQueueRetryAttempts times, then the
// controller stops with an error that says so.
func TestDurableStoreKeepsFailing(t *testing.T) {
	cases := []struct {
		name  string
		block bool   // the store hangs until its deadline instead of failing
		op    string // the call that fails
		want  string // in the log
	}{
		{name: "store fails", op: "sent", want: "store message sent 1: gave up after 3 attempts"},
		{name: "store times out", op: "sent", block: true, want: "store message sent 1: gave up after 3 attempts: context deadline exceeded"},
		{name: "load fails", op: "load", want: "load state: gave up after 3 attempts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errBoom := errors.New("boom")
			q := &failingQueue{Queue: durable.NewMemory[deliverytest.Job](), block: tc.block,
				fail: func(op string) error {
					if op == tc.op {
						return errBoom
					}
					return nil
				}}
			h := newPC(t, delivery.ProducerSettings{DurableQueueRetryAttempts: 2, DurableQueueRequestTimeout: time.Second,
				DurableQueueRetryBackoff: 100 * time.Millisecond}, delivery.WithDurableQueue[deliverytest.Job](q))
			h.start()
			if tc.op == "sent" {
				r := h.expectRequestNext(t, 1, 0)
				r.SendNextTo.Tell(deliverytest.Job{N: 1})
			}
			deadline := time.Now().Add(deliverytest.WaitLimit)
			for !h.logs.Contains(tc.want) {
				if time.Now().After(deadline) {
					t.Fatalf("no %q in the log:\n%s", tc.want, h.logs.Tail(10))
				}
				if timersPending(h.clock, 1) {
					h.clock.Advance(100 * time.Millisecond)
				}
				time.Sleep(time.Millisecond)
			}
			h.watcher.ExpectStopped(t, "/user/pc")
			h.cc.ExpectNone(t, 0) // nothing was sent unstored
		})
	}
}

// TestDurableProducerReplaced: a producer controller and its producer stop
// mid-stream (as if their process died) and new ones with the same queue
// take over: every job arrives, and only unconfirmed ones come twice.
func TestDurableProducerReplaced(t *testing.T) {
	const n = 300
	sys, _ := deliverytest.NewSystem(t)
	q := durable.NewMemory[deliverytest.Job]()
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", delivery.ConsumerSettings{FlowControlWindow: 20})
	if err != nil {
		t.Fatal(err)
	}
	col := deliverytest.NewCollector(n)
	slow := func() time.Duration { return 200 * time.Microsecond } // so the producer dies mid-stream
	deliverytest.SpawnConsumer(t, sys, "consumer", cc, deliverytest.ConsumerSpec{Delay: slow}, col)
	w := deliverytest.NewWatcher(t, sys)

	pc1, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc1", "p", delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	if err != nil {
		t.Fatal(err)
	}
	w.Watch(pc1)
	prod1 := deliverytest.SpawnProducer(t, sys, "producer1", pc1, deliverytest.ProducerSpec{Limit: n, BySeqNr: true})
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: pc1})
	deliverytest.Eventually(t, "a third of the jobs delivered", func() bool { return col.Count() >= n/3 })
	sys.Stop(prod1)
	sys.Stop(pc1)
	w.ExpectStopped(t, "/user/pc1")
	if c := col.Count(); c >= n {
		t.Fatalf("all %d jobs delivered before the producer stopped: nothing tested", c)
	}
	s, err := q.LoadState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	confirmed := int(s.HighestConfirmedSeqNr)

	pc2, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc2", "p", delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	if err != nil {
		t.Fatal(err)
	}
	deliverytest.SpawnProducer(t, sys, "producer2", pc2, deliverytest.ProducerSpec{Limit: n, BySeqNr: true})
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: pc2})
	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	checkAtLeastOnce(t, col.Jobs(), n, confirmed)
}

// checkAtLeastOnce fails unless every job 1..n is in got, in order apart
// from one restart, and any job that came twice is above confirmed (it was
// not known to be confirmed when the producer died).
func checkAtLeastOnce(t *testing.T, got []int, n, confirmed int) {
	t.Helper()
	if err := atLeastOnce(got, n, confirmed); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d deliveries of %d jobs; confirmed at the crash: %d", len(got), n, confirmed)
}

// atLeastOnce is checkAtLeastOnce's check, for a seed's goroutine.
func atLeastOnce(got []int, n, confirmed int) error {
	seen := make(map[int]int)
	for _, j := range got {
		seen[j]++
	}
	for j := 1; j <= n; j++ {
		if seen[j] == 0 {
			return fmt.Errorf("job %d lost (confirmed at the crash: %d)", j, confirmed)
		}
		if seen[j] > 1 && j <= confirmed {
			return fmt.Errorf("job %d delivered %d times, but it was confirmed (%d) before the crash", j, seen[j], confirmed)
		}
	}
	restarts := 0
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			restarts++
			if got[i] > got[i-1] || got[i] < confirmed {
				return fmt.Errorf("job %d after job %d (confirmed at the crash: %d)", got[i], got[i-1], confirmed)
			}
		}
	}
	if restarts > 1 {
		return fmt.Errorf("the sequence restarts %d times: %v", restarts, got)
	}
	return nil
}

// gatedQueue is a BatchQueue in memory whose first StoreBatch waits until
// release is closed, and which records how many messages each one stored.
type gatedQueue struct {
	*durable.Memory[deliverytest.Job]
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func (g *gatedQueue) StoreBatch(ctx context.Context, b durable.Batch[deliverytest.Job]) error {
	g.mu.Lock()
	first := len(g.sizes) == 0
	g.sizes = append(g.sizes, len(b.Sent))
	g.mu.Unlock()
	if first {
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Memory.StoreBatch(ctx, b)
}

// TestDurableStoresPipelined: while a store is in flight the producer is
// given more RequestNexts, as demand allows (without a store ahead); what
// it sends meanwhile is stored in one batch, and nothing goes out before it
// is stored, then all of it in order.
func TestDurableStoresPipelined(t *testing.T) {
	q := &gatedQueue{Memory: durable.NewMemory[deliverytest.Job](), release: make(chan struct{})}
	h := newPC(t, delivery.ProducerSettings{DurableQueueRequestTimeout: time.Hour, DurableQueueStoreAhead: -1}, delivery.WithDurableQueue[deliverytest.Job](q))
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1}) // the first message: its store hangs
	h.assoc = 1                               // the first association, which message 1 (not yet sent) would show
	h.request(0, 5)
	r = h.expectRequestNext(t, 2, 0)
	h.sendJobs(t, r, 2, 5, 0)
	h.producer.ExpectNone(t, 20*time.Millisecond) // the demand is used up
	h.cc.ExpectNone(t, 0)                         // nothing was sent unstored
	close(q.release)
	h.expectSeq(t, 1, true)
	for n := delivery.SeqNr(2); n <= 5; n++ {
		h.expectSeq(t, n, false)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.Equal(q.sizes, []int{1, 4}) {
		t.Fatalf("batches of %v messages, want [1 4]", q.sizes)
	}
}

// TestDurableStoresAhead: the producer is asked for up to
// DurableQueueStoreAhead messages beyond the consumer controller's demand;
// they are stored, none goes out before demand comes, then they go out at
// once, in order; and a producer controller that replaces this one sends
// the ones stored and never sent.
func TestDurableStoresAhead(t *testing.T) {
	q := durable.NewMemory[deliverytest.Job]()
	h := newPC(t, delivery.ProducerSettings{DurableQueueStoreAhead: 3}, delivery.WithDurableQueue[deliverytest.Job](q))
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
	// takeAhead gives the controller messages from..to, after which it must
	// ask for no more, send nothing, and store them.
	takeAhead := func(from, to delivery.SeqNr) {
		t.Helper()
		h.sendJobs(t, h.expectRequestNext(t, from, 0), from, to, 0)
		h.producer.ExpectNone(t, 20*time.Millisecond)
		h.cc.ExpectNone(t, 0)
		deliverytest.Eventually(t, "messages stored", func() bool {
			s, err := q.LoadState(context.Background())
			return err == nil && s.CurrentSeqNr == to+1
		})
	}
	takeAhead(2, 4) // demand is message 1 alone: 2-4 are taken ahead
	// Demand up to 3: 2 and 3 go out, and the producer may give 5 and 6.
	h.request(0, 3)
	h.expectSeq(t, 2, false)
	h.expectSeq(t, 3, false)
	takeAhead(5, 6)
	h.sys.Stop(h.pc)
	h.watcher.ExpectStopped(t, "/user/pc")

	// Its successor sends everything unconfirmed, sent or not: 1 to 6.
	pc, err := delivery.SpawnProducerController[deliverytest.Job](h.sys, "pc2", "p", delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	if err != nil {
		t.Fatal(err)
	}
	cc := deliverytest.NewProbe[delivery.ConsumerCommand[deliverytest.Job]](t, h.sys, "cc2")
	pc.Tell(delivery.ProducerStart[deliverytest.Job]{Producer: h.producer.Ref})
	pc.Tell(delivery.RegisterConsumer[deliverytest.Job]{ConsumerController: cc.Ref})
	for n := delivery.SeqNr(1); n <= 6; n++ {
		m, ok := cc.Expect(t).(*delivery.SequencedMessage[deliverytest.Job])
		if !ok || m.SeqNr != n || m.Message.N != int(n) || m.First != (n == 1) {
			t.Fatalf("message %d: got %+v", n, m)
		}
	}
}
