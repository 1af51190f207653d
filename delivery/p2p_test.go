package delivery_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
)

// wantJobs fails unless got is exactly 1..n.
func wantJobs(t testing.TB, got []int, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d deliveries, want %d (first few: %v)", len(got), n, got[:min(len(got), 20)])
	}
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("delivery %d is job %d, want %d (around it: %v)", i, v, i+1, got[max(0, i-5):min(len(got), i+5)])
		}
	}
}

// TestPointToPoint runs producer → producer controller → consumer
// controller → consumer without faults: every job arrives once, in order.
func TestPointToPoint(t *testing.T) {
	cases := []struct {
		name     string
		n        int                       // jobs to send
		ask      bool                      // the producer asks and checks the replies
		consumer delivery.ConsumerSettings // the consumer controller's settings
		producer delivery.ProducerSettings // the producer controller's settings
		pad      int                       // bytes of padding per job
	}{
		{name: "tell", n: 2000},
		{name: "ask", n: 500, ask: true},
		{name: "window 2", n: 300, consumer: delivery.ConsumerSettings{FlowControlWindow: 2}},
		{name: "window 3 (odd)", n: 300, consumer: delivery.ConsumerSettings{FlowControlWindow: 3}},
		{name: "only flow control", n: 1000, consumer: delivery.ConsumerSettings{OnlyFlowControl: true}},
		{name: "only flow control, ask", n: 300, ask: true, consumer: delivery.ConsumerSettings{OnlyFlowControl: true}},
		{name: "chunked 7 bytes", n: 200, producer: delivery.ProducerSettings{ChunkLargeMessages: 7}, pad: 40},
		{name: "chunked, ask", n: 100, ask: true, producer: delivery.ProducerSettings{ChunkLargeMessages: 5}, pad: 20},
		{name: "chunked, message fits", n: 200, producer: delivery.ProducerSettings{ChunkLargeMessages: 1000}},
		{name: "chunked 1 byte, window 2", n: 30, producer: delivery.ProducerSettings{ChunkLargeMessages: 1}, consumer: delivery.ConsumerSettings{FlowControlWindow: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, _ := deliverytest.NewSystem(t)
			pc, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc", "p1", tc.producer)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", tc.consumer)
			if err != nil {
				t.Fatal(err)
			}
			col := deliverytest.NewCollector(tc.n)
			deliverytest.SpawnConsumer(t, sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
			replies := make(chan delivery.SeqNr, tc.n)
			deliverytest.SpawnProducer(t, sys, "producer", pc, deliverytest.ProducerSpec{Limit: tc.n, Ask: tc.ask, Replies: replies, Pad: strings.Repeat("x", tc.pad)})
			cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: pc})

			ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
			defer cancel()
			if err := col.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			wantJobs(t, col.Jobs(), tc.n)
			if !tc.ask {
				return
			}
			var seqNrs []delivery.SeqNr
			for range tc.n {
				seqNrs = append(seqNrs, deliverytest.Recv(t, replies))
			}
			slices.Sort(seqNrs)
			if tc.producer.ChunkLargeMessages == 0 {
				for i, s := range seqNrs {
					if s != delivery.SeqNr(i+1) {
						t.Fatalf("reply %d is %d, want %d", i, s, i+1)
					}
				}
			}
			if len(slices.Compact(seqNrs)) != tc.n {
				t.Fatalf("replies are not distinct: %v", seqNrs)
			}
		})
	}
}

// TestRegisterConsumerFromProducerSide connects the controllers the other
// way round: RegisterConsumer to the producer controller.
func TestRegisterConsumerFromProducerSide(t *testing.T) {
	sys, _ := deliverytest.NewSystem(t)
	pc, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc", "p1", delivery.ProducerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", delivery.ConsumerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	col := deliverytest.NewCollector(100)
	deliverytest.SpawnConsumer(t, sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
	pc.Tell(delivery.RegisterConsumer[deliverytest.Job]{ConsumerController: cc})
	deliverytest.SpawnProducer(t, sys, "producer", pc, deliverytest.ProducerSpec{Limit: 100})
	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	wantJobs(t, col.Jobs(), 100)
}

// TestConsumerReplaced: the consumer (and with it its controller) stops
// mid-stream and a new one registers with the same producer controller,
// which keeps running: the unconfirmed messages go to the new consumer, and
// nothing is lost.
func TestConsumerReplaced(t *testing.T) {
	const n = 500
	sys, _ := deliverytest.NewSystem(t)
	pc, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc", "p1", delivery.ProducerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	w := deliverytest.NewWatcher(t, sys)
	cc1, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc1", delivery.ConsumerSettings{FlowControlWindow: 20})
	if err != nil {
		t.Fatal(err)
	}
	w.Watch(cc1)
	col1 := deliverytest.NewCollector(n)
	// Slow, so that it is stopped mid-stream.
	slow := func() time.Duration { return 200 * time.Microsecond }
	consumer1 := deliverytest.SpawnConsumer(t, sys, "consumer1", cc1, deliverytest.ConsumerSpec{Delay: slow}, col1)
	deliverytest.SpawnProducer(t, sys, "producer", pc, deliverytest.ProducerSpec{Limit: n})
	cc1.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: pc})
	deliverytest.Eventually(t, "a third delivered to the first consumer", func() bool { return col1.Count() >= n/3 })
	sys.Stop(consumer1)
	w.ExpectStopped(t, "/user/cc1") // the controller stops with its consumer
	if c := col1.Count(); c >= n {
		t.Fatalf("the first consumer had all %d jobs before it stopped: nothing tested", c)
	}

	cc2, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc2", delivery.ConsumerSettings{FlowControlWindow: 20})
	if err != nil {
		t.Fatal(err)
	}
	col2 := deliverytest.NewCollector(n)
	deliverytest.SpawnConsumer(t, sys, "consumer2", cc2, deliverytest.ConsumerSpec{}, col2)
	cc2.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: pc})
	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	if err := col2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	first, second := col1.Jobs(), col2.Jobs()
	last := first[len(first)-1]
	if second[0] > last+1 {
		t.Fatalf("the second consumer starts at job %d, after the first's last %d: jobs lost", second[0], last)
	}
	for i := 1; i < len(second); i++ {
		if second[i] != second[i-1]+1 {
			t.Fatalf("the second consumer got job %d after %d", second[i], second[i-1])
		}
	}
	wantJobs(t, first, len(first))
	t.Logf("first consumer: jobs 1..%d; second: %d..%d", last, second[0], second[len(second)-1])
}

// TestProducerReplaced: the producer controller stops and a new one (a new
// incarnation, numbering from 1 again) takes over the same consumer
// controller, which keeps running.
func TestProducerReplaced(t *testing.T) {
	for _, connect := range []string{"RegisterToProducerController", "RegisterConsumer"} {
		t.Run(connect, func(t *testing.T) {
			const n = 200
			sys, _ := deliverytest.NewSystem(t)
			cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", delivery.ConsumerSettings{FlowControlWindow: 20})
			if err != nil {
				t.Fatal(err)
			}
			col := deliverytest.NewCollector(0)
			deliverytest.SpawnConsumer(t, sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
			w := deliverytest.NewWatcher(t, sys)
			for round := 1; round <= 2; round++ {
				pc, err := delivery.SpawnProducerController[deliverytest.Job](sys, fmt.Sprintf("pc%d", round), "p", delivery.ProducerSettings{})
				if err != nil {
					t.Fatal(err)
				}
				w.Watch(pc)
				producer := deliverytest.SpawnProducer(t, sys, fmt.Sprintf("producer%d", round), pc, deliverytest.ProducerSpec{Limit: n})
				if connect == "RegisterConsumer" {
					pc.Tell(delivery.RegisterConsumer[deliverytest.Job]{ConsumerController: cc})
				} else {
					cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: pc})
				}
				deliverytest.Eventually(t, "the round's jobs delivered", func() bool { return col.Count() == round*n })
				sys.Stop(producer)
				sys.Stop(pc)
				w.ExpectStopped(t, fmt.Sprintf("/user/pc%d", round))
			}
			got := col.Jobs()
			wantJobs(t, got[:n], n)
			wantJobs(t, got[n:], n)
		})
	}
}
