package workpulling_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// workerStats asks wp for its stats.
func workerStats(t testing.TB, wp runtime.Ref[workpulling.Command[deliverytest.Job]]) workpulling.WorkerStats {
	t.Helper()
	return deliverytest.Ask(t, wp, func(r runtime.Ref[workpulling.WorkerStats]) workpulling.Command[deliverytest.Job] {
		return workpulling.GetWorkerStats[deliverytest.Job]{ReplyTo: r}
	})
}

// TestWorkPulling sends jobs through a work-pulling producer controller to
// several workers without faults: every job arrives exactly once, and
// every worker gets some.
func TestWorkPulling(t *testing.T) {
	cases := []struct {
		name     string
		n        int                       // jobs to send
		workers  int                       // workers registered before the producer starts
		ask      bool                      // the producer asks and checks the replies
		producer delivery.ProducerSettings // the workers' producer controllers' settings
		consumer delivery.ConsumerSettings // the workers' consumer controllers' settings
		pad      int                       // bytes of padding per job
		durable  bool                      // with a durable queue in memory
	}{
		{name: "one worker", n: 500, workers: 1},
		{name: "three workers", n: 1500, workers: 3},
		{name: "three workers, ask", n: 600, workers: 3, ask: true},
		{name: "three workers, window 2", n: 300, workers: 3, consumer: delivery.ConsumerSettings{FlowControlWindow: 2}},
		{name: "chunked 7 bytes", n: 300, workers: 3, producer: delivery.ProducerSettings{ChunkLargeMessages: 7}, pad: 40},
		{name: "chunked, ask", n: 200, workers: 2, ask: true, producer: delivery.ProducerSettings{ChunkLargeMessages: 5}, pad: 20},
		{name: "durable", n: 600, workers: 3, durable: true},
		{name: "durable, ask, chunked", n: 300, workers: 3, durable: true, ask: true, producer: delivery.ProducerSettings{ChunkLargeMessages: 6}, pad: 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, _ := deliverytest.NewSystem(t)
			key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
			col := deliverytest.NewCollectorAll(tc.n)
			for i := range tc.workers {
				cs := tc.consumer
				cs.ResendIntervalMin = 50 * time.Millisecond // the last confirmations come with an idle Request
				deliverytest.SpawnWorker(t, sys, fmt.Sprintf("worker%d", i), key, deliverytest.WorkerSpec{Consumer: cs}, col)
			}
			q, opts := deliverytest.MemoryQueue(tc.durable)
			wp := deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{Producer: tc.producer}, opts...)
			deliverytest.Eventually(t, "all workers known", func() bool { return workerStats(t, wp).NumberOfWorkers == tc.workers })
			replies := make(chan delivery.SeqNr, tc.n)
			deliverytest.SpawnProducer(t, sys, "producer", nil, deliverytest.ProducerSpec{Limit: tc.n, Ask: tc.ask, Replies: replies,
				Pad: deliverytest.Padding(tc.pad), Connect: deliverytest.WorkPullingConnect(wp)})
			deliverytest.WaitAll(t, col)
			deliverytest.ExactlyOnce(t, col, tc.n)
			perWorker := make(map[string]int)
			for _, d := range col.Deliveries() {
				perWorker[d.ProducerID]++
			}
			if len(perWorker) != tc.workers {
				t.Fatalf("jobs went to %d workers, want all %d: %v", len(perWorker), tc.workers, perWorker)
			}
			if tc.ask {
				deliverytest.ExpectReplies(t, replies, tc.n)
			}
			if tc.durable {
				deliverytest.QueueDrained(t, q, delivery.SeqNr(tc.n)+1)
			}
		})
	}
}

// TestWorkPullingWorkerLeaves: a worker leaves mid-stream (it stops, or it
// only deregisters) while it has unconfirmed messages: they go to the
// other workers, and no job is lost.
func TestWorkPullingWorkerLeaves(t *testing.T) {
	cases := []struct {
		name    string
		how     string // "stop" the worker, or "deregister" it
		durable bool   // with a durable queue in memory
		chunk   int    // ChunkLargeMessages of the workers' producer controllers
	}{
		{name: "stops", how: "stop"},
		{name: "deregisters", how: "deregister"},
		{name: "stops, durable", how: "stop", durable: true},
		{name: "deregisters, durable, chunked", how: "deregister", durable: true, chunk: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const n = 600
			sys, logs := deliverytest.NewSystem(t)
			key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
			col := deliverytest.NewCollectorAll(n)
			fast := delivery.ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond}
			// The leaving worker confirms its first 10 jobs, then none: it
			// surely has unconfirmed messages when it leaves. The staying
			// workers keep theirs unconfirmed until then, so that they
			// cannot take all the jobs before it has 11: their windows fill,
			// and the rest goes to the leaving worker.
			var held atomic.Int32
			hold := func(delivery.Delivery[deliverytest.Job]) bool { return held.Add(1) > 10 }
			stayBack := deliverytest.ConsumerSpec{Hold: func(delivery.Delivery[deliverytest.Job]) bool { return held.Load() <= 10 }}
			leaving := deliverytest.SpawnWorker(t, sys, "leaving", key, deliverytest.WorkerSpec{Consumer: fast, Spec: deliverytest.ConsumerSpec{Drop: hold}}, col)
			deliverytest.SpawnWorker(t, sys, "staying1", key, deliverytest.WorkerSpec{Consumer: fast, Spec: stayBack}, col)
			deliverytest.SpawnWorker(t, sys, "staying2", key, deliverytest.WorkerSpec{Consumer: fast, Spec: stayBack}, col)
			q, opts := deliverytest.MemoryQueue(tc.durable)
			wp := deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{Producer: delivery.ProducerSettings{ChunkLargeMessages: tc.chunk}}, opts...)
			deliverytest.Eventually(t, "all workers known", func() bool { return workerStats(t, wp).NumberOfWorkers == 3 })
			deliverytest.SpawnProducer(t, sys, "producer", nil, deliverytest.ProducerSpec{Limit: n, Connect: deliverytest.WorkPullingConnect(wp)})
			deliverytest.Eventually(t, "the leaving worker holds an unconfirmed job", func() bool { return held.Load() > 10 })
			switch tc.how {
			case "stop":
				leaving.Stop(sys)
			default:
				runtime.Deregister(sys, key, leaving.Registered)
			}
			deliverytest.WaitAll(t, col)
			if s := workerStats(t, wp); s.NumberOfWorkers != 2 {
				t.Fatalf("%d workers after one left, want 2", s.NumberOfWorkers)
			}
			if !logs.Contains("worker left") || logs.Contains("handedOver=0") {
				t.Fatalf("the worker left without messages to hand over:\n%s", logs.Tail(10))
			}
			if tc.durable {
				deliverytest.QueueDrained(t, q, 0) // the handed-over ones confirmed under their new workers
			}
		})
	}
}

// TestWorkPullingWithoutWorkers: with no worker the producer gets no
// RequestNext; a message sent after the last worker with demand left waits
// in the buffer (as do messages sent without RequestNext, up to
// BufferSize), and goes out once a worker registers.
func TestWorkPullingWithoutWorkers(t *testing.T) {
	sys, _ := deliverytest.NewSystem(t)
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
	wp := deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{})
	producer := deliverytest.WorkPullingProbe(t, sys, wp)
	if s := workerStats(t, wp); s.NumberOfWorkers != 0 {
		t.Fatalf("stats %+v, want no worker", s)
	}
	producer.ExpectNone(t, 20*time.Millisecond)

	col := deliverytest.NewCollectorAll(4)
	w1 := deliverytest.SpawnWorker(t, sys, "worker1", key, deliverytest.WorkerSpec{}, col)
	r := producer.Expect(t)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	deliverytest.Eventually(t, "job 1 delivered", func() bool { return col.Distinct() == 1 })
	r = producer.Expect(t)
	w1.Stop(sys)
	deliverytest.Eventually(t, "the worker is gone", func() bool { return workerStats(t, wp).NumberOfWorkers == 0 })
	r.SendNextTo.Tell(deliverytest.Job{N: 2}) // its worker left in between
	r.SendNextTo.Tell(deliverytest.Job{N: 3}) // without RequestNext: buffered too
	r.SendNextTo.Tell(deliverytest.Job{N: 4})
	deliverytest.Eventually(t, "three jobs buffered", func() bool { return workerStats(t, wp).Buffered == 3 })
	producer.ExpectNone(t, 20*time.Millisecond)

	deliverytest.SpawnWorker(t, sys, "worker2", key, deliverytest.WorkerSpec{}, col)
	deliverytest.WaitAll(t, col)
	deliverytest.ExactlyOnce(t, col, 4)
	producer.Expect(t) // demand again, and nothing waits: the producer may send
}

// TestWorkPullingBufferFull: a producer that sends more than BufferSize
// messages nobody can take stops the controller with an error that says so.
func TestWorkPullingBufferFull(t *testing.T) {
	sys, logs := deliverytest.NewSystem(t)
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
	wp := deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{BufferSize: 2})
	w := deliverytest.NewWatcher(t, sys)
	w.Watch(wp)
	producer := deliverytest.WorkPullingProbe(t, sys, wp)
	col := deliverytest.NewCollectorAll(1)
	w1 := deliverytest.SpawnWorker(t, sys, "worker1", key, deliverytest.WorkerSpec{}, col)
	r := producer.Expect(t)
	w1.Stop(sys)
	deliverytest.Eventually(t, "the worker is gone", func() bool { return workerStats(t, wp).NumberOfWorkers == 0 })
	for n := 1; n <= 3; n++ {
		r.SendNextTo.Tell(deliverytest.Job{N: n})
	}
	deliverytest.ExpectFailed(t, w, logs, "/user/wp", "buffer full", "workpulling.Settings.BufferSize")
}

// TestWorkPullingWorkersAdded: workers that register while jobs flow get
// their share, and every job arrives once.
func TestWorkPullingWorkersAdded(t *testing.T) {
	const n = 2000
	sys, _ := deliverytest.NewSystem(t)
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
	col := deliverytest.NewCollectorAll(n)
	slow := deliverytest.ConsumerSpec{Delay: func() time.Duration { return 50 * time.Microsecond }}
	deliverytest.SpawnWorker(t, sys, "worker0", key, deliverytest.WorkerSpec{Spec: slow}, col)
	wp := deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{})
	deliverytest.SpawnProducer(t, sys, "producer", nil, deliverytest.ProducerSpec{Limit: n, Connect: deliverytest.WorkPullingConnect(wp)})
	deliverytest.Eventually(t, "a tenth of the jobs delivered", func() bool { return col.Count() >= n/10 })
	if c := col.Count(); c >= n/2 {
		t.Fatalf("%d of %d jobs delivered before the workers were added: nothing tested", c, n)
	}
	deliverytest.SpawnWorker(t, sys, "worker1", key, deliverytest.WorkerSpec{Spec: slow}, col)
	deliverytest.SpawnWorker(t, sys, "worker2", key, deliverytest.WorkerSpec{Spec: slow}, col)
	deliverytest.WaitAll(t, col)
	deliverytest.ExactlyOnce(t, col, n)
	perWorker := make(map[string]int)
	for _, d := range col.Deliveries() {
		perWorker[d.ProducerID]++
	}
	if len(perWorker) != 3 {
		t.Fatalf("jobs went to %d workers, want 3: %v", len(perWorker), perWorker)
	}
}

// TestWorkPullingDurableRestart: a durable work-pulling controller and its
// producer stop mid-stream; new ones with the same queue send the
// unconfirmed messages again (each stored again under its new worker, the
// old entry confirmed) and go on: every job arrives, and the queue ends
// with nothing unconfirmed.
func TestWorkPullingDurableRestart(t *testing.T) {
	const n = 600
	sys, _ := deliverytest.NewSystem(t)
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
	col := deliverytest.NewCollectorAll(n)
	// The first producer stops after job stopAt; the jobs after held stay
	// unconfirmed until then, fewer than the workers' windows take.
	const held, stopAt = n / 3, n/3 + 30
	gate := &deliverytest.HoldGate{Above: held}
	slow := deliverytest.ConsumerSpec{Delay: func() time.Duration { return 100 * time.Microsecond }, Hold: gate.Holds}
	fast := delivery.ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond}
	for i := range 3 {
		deliverytest.SpawnWorker(t, sys, fmt.Sprintf("worker%d", i), key, deliverytest.WorkerSpec{Consumer: fast, Spec: slow}, col)
	}
	q := durable.NewMemory[deliverytest.Job]()
	w := deliverytest.NewWatcher(t, sys)
	wp1 := deliverytest.SpawnWP(t, sys, "wp1", key, workpulling.Settings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	w.Watch(wp1)
	// The producer asks: a reply says the job is stored. Without workers
	// leaving, the controller's sequence numbers are the job numbers.
	replies := make(chan delivery.SeqNr, n)
	prod1 := deliverytest.SpawnProducer(t, sys, "producer1", nil, deliverytest.ProducerSpec{Limit: stopAt, Ask: true, Replies: replies, Connect: deliverytest.WorkPullingConnect(wp1)})
	accepted, _ := deliverytest.StopMidStream(t, sys, w, prod1, wp1, replies, q, stopAt)
	gate.Open()

	wp2 := deliverytest.SpawnWP(t, sys, "wp2", key, workpulling.Settings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	deliverytest.SpawnProducer(t, sys, "producer2", nil, deliverytest.ProducerSpec{Limit: n, First: accepted + 1, Connect: deliverytest.WorkPullingConnect(wp2)})
	deliverytest.WaitAll(t, col)
	deliverytest.QueueDrained(t, q, 0)
}

// recordingQueue is a durable queue that records its successful calls, in
// order.
type recordingQueue struct {
	durable.Queue[deliverytest.Job]
	mu  sync.Mutex
	ops []string
}

func (q *recordingQueue) StoreMessageSent(ctx context.Context, m durable.MessageSent[deliverytest.Job]) error {
	err := q.Queue.StoreMessageSent(ctx, m)
	if err == nil {
		q.mu.Lock()
		q.ops = append(q.ops, fmt.Sprintf("sent %d %s %d", m.SeqNr, m.Qualifier, m.Message.N))
		q.mu.Unlock()
	}
	return err
}

func (q *recordingQueue) StoreMessageConfirmed(ctx context.Context, seqNr delivery.SeqNr, qualifier string, at time.Time) error {
	err := q.Queue.StoreMessageConfirmed(ctx, seqNr, qualifier, at)
	if err == nil {
		q.mu.Lock()
		q.ops = append(q.ops, fmt.Sprintf("confirmed %d %s", seqNr, qualifier))
		q.mu.Unlock()
	}
	return err
}

// TestWorkPullingDurableLoadRestores: the unconfirmed messages a durable
// work-pulling controller finds when it starts (stored for a worker of a
// previous controller) are each stored again, under a new sequence number
// and the worker they go to now, before their old entry is confirmed: at
// no moment is a message missing from the queue.
func TestWorkPullingDurableLoadRestores(t *testing.T) {
	sys, _ := deliverytest.NewSystem(t)
	mem := durable.NewMemory[deliverytest.Job]()
	ctx := context.Background()
	for n := 1; n <= 3; n++ {
		if err := mem.StoreMessageSent(ctx, durable.MessageSent[deliverytest.Job]{SeqNr: delivery.SeqNr(n), Message: deliverytest.Job{N: n}, Qualifier: "wp-old"}); err != nil {
			t.Fatal(err)
		}
	}
	q := &recordingQueue{Queue: mem}
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
	col := deliverytest.NewCollectorAll(3)
	deliverytest.SpawnWorker(t, sys, "worker", key, deliverytest.WorkerSpec{Consumer: delivery.ConsumerSettings{ResendIntervalMin: 20 * time.Millisecond}}, col)
	deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	deliverytest.WaitAll(t, col)
	deliverytest.ExactlyOnce(t, col, 3)
	deliverytest.Eventually(t, "nothing unconfirmed in the queue", func() bool {
		s, err := mem.LoadState(ctx)
		return err == nil && len(s.Unconfirmed) == 0 && s.CurrentSeqNr == 7 && s.Confirmed["wp-old"].SeqNr == 3
	})
	q.mu.Lock()
	defer q.mu.Unlock()
	stored := make(map[int]bool) // jobs stored again so far
	for _, op := range q.ops {
		var seqNr delivery.SeqNr
		var qual string
		var n int
		if _, err := fmt.Sscanf(op, "sent %d %s %d", &seqNr, &qual, &n); err == nil {
			if seqNr < 4 || qual == "wp-old" {
				t.Fatalf("%q: stored again under an old number or qualifier", op)
			}
			stored[n] = true
			continue
		}
		if _, err := fmt.Sscanf(op, "confirmed %d %s", &seqNr, &qual); err == nil && qual == "wp-old" {
			for j := 1; j <= int(seqNr); j++ {
				if !stored[j] {
					t.Fatalf("%q before job %d was stored again: %v", op, j, q.ops)
				}
			}
		}
	}
}
