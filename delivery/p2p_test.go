package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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
		n        int              // jobs to send
		ask      bool             // the producer asks and checks the replies
		consumer ConsumerSettings // the consumer controller's settings
		producer ProducerSettings // the producer controller's settings
		pad      int              // bytes of padding per job
	}{
		{name: "tell", n: 2000},
		{name: "ask", n: 500, ask: true},
		{name: "window 2", n: 300, consumer: ConsumerSettings{FlowControlWindow: 2}},
		{name: "window 3 (odd)", n: 300, consumer: ConsumerSettings{FlowControlWindow: 3}},
		{name: "only flow control", n: 1000, consumer: ConsumerSettings{OnlyFlowControl: true}},
		{name: "only flow control, ask", n: 300, ask: true, consumer: ConsumerSettings{OnlyFlowControl: true}},
		{name: "chunked 7 bytes", n: 200, producer: ProducerSettings{ChunkLargeMessages: 7}, pad: 40},
		{name: "chunked, ask", n: 100, ask: true, producer: ProducerSettings{ChunkLargeMessages: 5}, pad: 20},
		{name: "chunked, message fits", n: 200, producer: ProducerSettings{ChunkLargeMessages: 1000}},
		{name: "chunked 1 byte, window 2", n: 30, producer: ProducerSettings{ChunkLargeMessages: 1}, consumer: ConsumerSettings{FlowControlWindow: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, _ := newSystem(t)
			pc, err := SpawnProducerController[job](sys, "pc", "p1", tc.producer)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := SpawnConsumerController[job](sys, "cc", tc.consumer)
			if err != nil {
				t.Fatal(err)
			}
			col := newCollector(tc.n)
			spawnConsumer(t, sys, "consumer", cc, consumerSpec{}, col)
			replies := make(chan SeqNr, tc.n)
			spawnProducer(t, sys, "producer", pc, producerSpec{limit: tc.n, ask: tc.ask, replies: replies, pad: strings.Repeat("x", tc.pad)})
			cc.Tell(RegisterToProducerController[job]{ProducerController: pc})

			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := col.wait(ctx); err != nil {
				t.Fatal(err)
			}
			wantJobs(t, col.jobs(), tc.n)
			if !tc.ask {
				return
			}
			var seqNrs []SeqNr
			for range tc.n {
				seqNrs = append(seqNrs, recv(t, replies))
			}
			slices.Sort(seqNrs)
			if tc.producer.ChunkLargeMessages == 0 {
				for i, s := range seqNrs {
					if s != SeqNr(i+1) {
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
	sys, _ := newSystem(t)
	pc, err := SpawnProducerController[job](sys, "pc", "p1", ProducerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := SpawnConsumerController[job](sys, "cc", ConsumerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(100)
	spawnConsumer(t, sys, "consumer", cc, consumerSpec{}, col)
	pc.Tell(RegisterConsumer[job]{ConsumerController: cc})
	spawnProducer(t, sys, "producer", pc, producerSpec{limit: 100})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := col.wait(ctx); err != nil {
		t.Fatal(err)
	}
	wantJobs(t, col.jobs(), 100)
}

// TestConsumerReplaced: the consumer (and with it its controller) stops
// mid-stream and a new one registers with the same producer controller,
// which keeps running: the unconfirmed messages go to the new consumer, and
// nothing is lost.
func TestConsumerReplaced(t *testing.T) {
	const n = 500
	sys, _ := newSystem(t)
	pc, err := SpawnProducerController[job](sys, "pc", "p1", ProducerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWatcher(t, sys)
	cc1, err := SpawnConsumerController[job](sys, "cc1", ConsumerSettings{FlowControlWindow: 20})
	if err != nil {
		t.Fatal(err)
	}
	w.watch(cc1)
	col1 := newCollector(n)
	// Slow, so that it is stopped mid-stream.
	slow := func() time.Duration { return 200 * time.Microsecond }
	consumer1 := spawnConsumer(t, sys, "consumer1", cc1, consumerSpec{delay: slow}, col1)
	spawnProducer(t, sys, "producer", pc, producerSpec{limit: n})
	cc1.Tell(RegisterToProducerController[job]{ProducerController: pc})
	eventually(t, "a third delivered to the first consumer", func() bool { return col1.count() >= n/3 })
	sys.Stop(consumer1)
	w.expectStopped(t, "/user/cc1") // the controller stops with its consumer
	if c := col1.count(); c >= n {
		t.Fatalf("the first consumer had all %d jobs before it stopped: nothing tested", c)
	}

	cc2, err := SpawnConsumerController[job](sys, "cc2", ConsumerSettings{FlowControlWindow: 20})
	if err != nil {
		t.Fatal(err)
	}
	col2 := newCollector(n)
	spawnConsumer(t, sys, "consumer2", cc2, consumerSpec{}, col2)
	cc2.Tell(RegisterToProducerController[job]{ProducerController: pc})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := col2.wait(ctx); err != nil {
		t.Fatal(err)
	}
	first, second := col1.jobs(), col2.jobs()
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
			sys, _ := newSystem(t)
			cc, err := SpawnConsumerController[job](sys, "cc", ConsumerSettings{FlowControlWindow: 20})
			if err != nil {
				t.Fatal(err)
			}
			col := newCollector(0)
			spawnConsumer(t, sys, "consumer", cc, consumerSpec{}, col)
			w := newWatcher(t, sys)
			for round := 1; round <= 2; round++ {
				pc, err := SpawnProducerController[job](sys, fmt.Sprintf("pc%d", round), "p", ProducerSettings{})
				if err != nil {
					t.Fatal(err)
				}
				w.watch(pc)
				producer := spawnProducer(t, sys, fmt.Sprintf("producer%d", round), pc, producerSpec{limit: n})
				if connect == "RegisterConsumer" {
					pc.Tell(RegisterConsumer[job]{ConsumerController: cc})
				} else {
					cc.Tell(RegisterToProducerController[job]{ProducerController: pc})
				}
				eventually(t, "the round's jobs delivered", func() bool { return col.count() == round*n })
				sys.Stop(producer)
				sys.Stop(pc)
				w.expectStopped(t, fmt.Sprintf("/user/pc%d", round))
			}
			got := col.jobs()
			wantJobs(t, got[:n], n)
			wantJobs(t, got[n:], n)
		})
	}
}
