package delivery

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/runtime"
)

// testWorker is a worker of work pulling: a consumer controller, its
// consumer, and, when the test wants a lossy network, a faultLink in front
// of the controller; registered is what the receptionist lists.
type testWorker struct {
	cc         runtime.Ref[ConsumerCommand[job]]
	consumer   runtime.Ref[consMsg]
	link       *faultLink[job]
	registered runtime.Ref[ConsumerCommand[job]]
}

// workerSpec describes a testWorker.
type workerSpec struct {
	consumer ConsumerSettings // its consumer controller's settings
	spec     consumerSpec     // its consumer's behavior
	toCC     *faults          // with a link: what it does to SequencedMessages; nil: no link
	toPC     faults           // with a link: what it does to the answers
	seed     uint64           // with a link: its random streams
}

// spawnWorker starts a worker named name and registers it under key.
func spawnWorker(t testing.TB, sys *runtime.System, name string, key runtime.ServiceKey[ConsumerCommand[job]], ws workerSpec, col *collector) *testWorker {
	t.Helper()
	cc, err := SpawnConsumerController[job](sys, name+"-cc", ws.consumer)
	if err != nil {
		t.Fatalf("spawn worker %s: %v", name, err)
	}
	w := &testWorker{cc: cc, registered: cc}
	w.consumer = spawnConsumer(t, sys, name, cc, ws.spec, col)
	if ws.toCC != nil {
		w.link = newFaultLink[job](t, sys, name+"-link", nil, cc, *ws.toCC, ws.toPC, ws.seed)
		w.registered = w.link.toCC
	}
	runtime.Register(sys, key, w.registered)
	return w
}

// stop stops the worker's consumer, its consumer controller and its link:
// the receptionist drops it.
func (w *testWorker) stop(sys *runtime.System) {
	sys.Stop(w.consumer)
	sys.Stop(w.cc)
	if w.link != nil {
		sys.Stop(w.link.toCC)
		sys.Stop(w.link.toPC)
	}
}

// workerStats asks wp for its stats.
func workerStats(t testing.TB, wp runtime.Ref[WorkPullingCommand[job]]) WorkerStats {
	t.Helper()
	return ask(t, wp, func(r runtime.Ref[WorkerStats]) WorkPullingCommand[job] { return GetWorkerStats[job]{ReplyTo: r} })
}

// TestWorkPulling sends jobs through a work-pulling producer controller to
// several workers without faults: every job arrives exactly once, and
// every worker gets some.
func TestWorkPulling(t *testing.T) {
	cases := []struct {
		name     string
		n        int              // jobs to send
		workers  int              // workers registered before the producer starts
		ask      bool             // the producer asks and checks the replies
		producer ProducerSettings // the workers' producer controllers' settings
		consumer ConsumerSettings // the workers' consumer controllers' settings
		pad      int              // bytes of padding per job
		durable  bool             // with a durable queue in memory
	}{
		{name: "one worker", n: 500, workers: 1},
		{name: "three workers", n: 1500, workers: 3},
		{name: "three workers, ask", n: 600, workers: 3, ask: true},
		{name: "three workers, window 2", n: 300, workers: 3, consumer: ConsumerSettings{FlowControlWindow: 2}},
		{name: "chunked 7 bytes", n: 300, workers: 3, producer: ProducerSettings{ChunkLargeMessages: 7}, pad: 40},
		{name: "chunked, ask", n: 200, workers: 2, ask: true, producer: ProducerSettings{ChunkLargeMessages: 5}, pad: 20},
		{name: "durable", n: 600, workers: 3, durable: true},
		{name: "durable, ask, chunked", n: 300, workers: 3, durable: true, ask: true, producer: ProducerSettings{ChunkLargeMessages: 6}, pad: 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, _ := newSystem(t)
			key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
			col := newCollectorAll(tc.n)
			for i := range tc.workers {
				cs := tc.consumer
				cs.ResendIntervalMin = 50 * time.Millisecond // the last confirmations come with an idle Request
				spawnWorker(t, sys, fmt.Sprintf("worker%d", i), key, workerSpec{consumer: cs}, col)
			}
			q, opts := memoryQueue(tc.durable)
			wp := spawnWP(t, sys, "wp", key, WorkPullingSettings{Producer: tc.producer}, opts...)
			eventually(t, "all workers known", func() bool { return workerStats(t, wp).NumberOfWorkers == tc.workers })
			replies := make(chan SeqNr, tc.n)
			spawnProducer(t, sys, "producer", nil, producerSpec{limit: tc.n, ask: tc.ask, replies: replies,
				pad: padding(tc.pad), connect: workPullingConnect(wp)})
			waitAll(t, col)
			exactlyOnce(t, col, tc.n)
			perWorker := make(map[string]int)
			for _, d := range col.deliveries() {
				perWorker[d.ProducerID]++
			}
			if len(perWorker) != tc.workers {
				t.Fatalf("jobs went to %d workers, want all %d: %v", len(perWorker), tc.workers, perWorker)
			}
			if tc.ask {
				expectReplies(t, replies, tc.n)
			}
			if tc.durable {
				queueDrained(t, q, SeqNr(tc.n)+1)
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
			sys, logs := newSystem(t)
			key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
			col := newCollectorAll(n)
			fast := ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond}
			// The leaving worker confirms its first 10 jobs, then none: it
			// surely has unconfirmed messages when it leaves. The staying
			// workers keep theirs unconfirmed until then, so that they
			// cannot take all the jobs before it has 11: their windows fill,
			// and the rest goes to the leaving worker.
			var held atomic.Int32
			hold := func(Delivery[job]) bool { return held.Add(1) > 10 }
			stayBack := consumerSpec{hold: func(Delivery[job]) bool { return held.Load() <= 10 }}
			leaving := spawnWorker(t, sys, "leaving", key, workerSpec{consumer: fast, spec: consumerSpec{drop: hold}}, col)
			spawnWorker(t, sys, "staying1", key, workerSpec{consumer: fast, spec: stayBack}, col)
			spawnWorker(t, sys, "staying2", key, workerSpec{consumer: fast, spec: stayBack}, col)
			q, opts := memoryQueue(tc.durable)
			wp := spawnWP(t, sys, "wp", key, WorkPullingSettings{Producer: ProducerSettings{ChunkLargeMessages: tc.chunk}}, opts...)
			eventually(t, "all workers known", func() bool { return workerStats(t, wp).NumberOfWorkers == 3 })
			spawnProducer(t, sys, "producer", nil, producerSpec{limit: n, connect: workPullingConnect(wp)})
			eventually(t, "the leaving worker holds an unconfirmed job", func() bool { return held.Load() > 10 })
			switch tc.how {
			case "stop":
				leaving.stop(sys)
			default:
				runtime.Deregister(sys, key, leaving.registered)
			}
			waitAll(t, col)
			if s := workerStats(t, wp); s.NumberOfWorkers != 2 {
				t.Fatalf("%d workers after one left, want 2", s.NumberOfWorkers)
			}
			if !logs.contains("worker left") || logs.contains("handedOver=0") {
				t.Fatalf("the worker left without messages to hand over:\n%s", logs.tail(10))
			}
			if tc.durable {
				queueDrained(t, q, 0) // the handed-over ones confirmed under their new workers
			}
		})
	}
}

// TestWorkPullingWithoutWorkers: with no worker the producer gets no
// RequestNext; a message sent after the last worker with demand left waits
// in the buffer (as do messages sent without RequestNext, up to
// BufferSize), and goes out once a worker registers.
func TestWorkPullingWithoutWorkers(t *testing.T) {
	sys, _ := newSystem(t)
	key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
	wp := spawnWP(t, sys, "wp", key, WorkPullingSettings{})
	producer := workPullingProbe(t, sys, wp)
	if s := workerStats(t, wp); s.NumberOfWorkers != 0 {
		t.Fatalf("stats %+v, want no worker", s)
	}
	producer.ExpectNone(t, 20*time.Millisecond)

	col := newCollectorAll(4)
	w1 := spawnWorker(t, sys, "worker1", key, workerSpec{}, col)
	r := producer.Expect(t)
	r.SendNextTo.Tell(job{N: 1})
	eventually(t, "job 1 delivered", func() bool { return col.distinct() == 1 })
	r = producer.Expect(t)
	w1.stop(sys)
	eventually(t, "the worker is gone", func() bool { return workerStats(t, wp).NumberOfWorkers == 0 })
	r.SendNextTo.Tell(job{N: 2}) // its worker left in between
	r.SendNextTo.Tell(job{N: 3}) // without RequestNext: buffered too
	r.SendNextTo.Tell(job{N: 4})
	eventually(t, "three jobs buffered", func() bool { return workerStats(t, wp).Buffered == 3 })
	producer.ExpectNone(t, 20*time.Millisecond)

	spawnWorker(t, sys, "worker2", key, workerSpec{}, col)
	waitAll(t, col)
	exactlyOnce(t, col, 4)
	producer.Expect(t) // demand again, and nothing waits: the producer may send
}

// TestWorkPullingBufferFull: a producer that sends more than BufferSize
// messages nobody can take stops the controller with an error that says so.
func TestWorkPullingBufferFull(t *testing.T) {
	sys, logs := newSystem(t)
	key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
	wp := spawnWP(t, sys, "wp", key, WorkPullingSettings{BufferSize: 2})
	w := newWatcher(t, sys)
	w.watch(wp)
	producer := workPullingProbe(t, sys, wp)
	col := newCollectorAll(1)
	w1 := spawnWorker(t, sys, "worker1", key, workerSpec{}, col)
	r := producer.Expect(t)
	w1.stop(sys)
	eventually(t, "the worker is gone", func() bool { return workerStats(t, wp).NumberOfWorkers == 0 })
	for n := 1; n <= 3; n++ {
		r.SendNextTo.Tell(job{N: n})
	}
	expectFailed(t, w, logs, "/user/wp", "buffer full", "WorkPullingSettings.BufferSize")
}

// TestWorkPullingWorkersAdded: workers that register while jobs flow get
// their share, and every job arrives once.
func TestWorkPullingWorkersAdded(t *testing.T) {
	const n = 2000
	sys, _ := newSystem(t)
	key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
	col := newCollectorAll(n)
	slow := consumerSpec{delay: func() time.Duration { return 50 * time.Microsecond }}
	spawnWorker(t, sys, "worker0", key, workerSpec{spec: slow}, col)
	wp := spawnWP(t, sys, "wp", key, WorkPullingSettings{})
	spawnProducer(t, sys, "producer", nil, producerSpec{limit: n, connect: workPullingConnect(wp)})
	eventually(t, "a tenth of the jobs delivered", func() bool { return col.count() >= n/10 })
	if c := col.count(); c >= n/2 {
		t.Fatalf("%d of %d jobs delivered before the workers were added: nothing tested", c, n)
	}
	spawnWorker(t, sys, "worker1", key, workerSpec{spec: slow}, col)
	spawnWorker(t, sys, "worker2", key, workerSpec{spec: slow}, col)
	waitAll(t, col)
	exactlyOnce(t, col, n)
	perWorker := make(map[string]int)
	for _, d := range col.deliveries() {
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
	sys, _ := newSystem(t)
	key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
	col := newCollectorAll(n)
	// The first producer stops after job stopAt; the jobs after held stay
	// unconfirmed until then, fewer than the workers' windows take.
	const held, stopAt = n / 3, n/3 + 30
	gate := &holdGate{above: held}
	slow := consumerSpec{delay: func() time.Duration { return 100 * time.Microsecond }, hold: gate.holds}
	fast := ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond}
	for i := range 3 {
		spawnWorker(t, sys, fmt.Sprintf("worker%d", i), key, workerSpec{consumer: fast, spec: slow}, col)
	}
	q := durable.NewMemory[job]()
	w := newWatcher(t, sys)
	wp1 := spawnWP(t, sys, "wp1", key, WorkPullingSettings{}, WithDurableQueue[job](q))
	w.watch(wp1)
	// The producer asks: a reply says the job is stored. Without workers
	// leaving, the controller's sequence numbers are the job numbers.
	replies := make(chan SeqNr, n)
	prod1 := spawnProducer(t, sys, "producer1", nil, producerSpec{limit: stopAt, ask: true, replies: replies, connect: workPullingConnect(wp1)})
	accepted, _ := stopMidStream(t, sys, w, prod1, wp1, replies, q, stopAt)
	gate.open()

	wp2 := spawnWP(t, sys, "wp2", key, WorkPullingSettings{}, WithDurableQueue[job](q))
	spawnProducer(t, sys, "producer2", nil, producerSpec{limit: n, first: accepted + 1, connect: workPullingConnect(wp2)})
	waitAll(t, col)
	queueDrained(t, q, 0)
}

// recordingQueue is a durable queue that records its successful calls, in
// order.
type recordingQueue struct {
	durable.Queue[job]
	mu  sync.Mutex
	ops []string
}

func (q *recordingQueue) StoreMessageSent(ctx context.Context, m durable.MessageSent[job]) error {
	err := q.Queue.StoreMessageSent(ctx, m)
	if err == nil {
		q.mu.Lock()
		q.ops = append(q.ops, fmt.Sprintf("sent %d %s %d", m.SeqNr, m.Qualifier, m.Message.N))
		q.mu.Unlock()
	}
	return err
}

func (q *recordingQueue) StoreMessageConfirmed(ctx context.Context, seqNr SeqNr, qualifier string, at time.Time) error {
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
	sys, _ := newSystem(t)
	mem := durable.NewMemory[job]()
	ctx := context.Background()
	for n := 1; n <= 3; n++ {
		if err := mem.StoreMessageSent(ctx, durable.MessageSent[job]{SeqNr: SeqNr(n), Message: job{N: n}, Qualifier: "wp-old"}); err != nil {
			t.Fatal(err)
		}
	}
	q := &recordingQueue{Queue: mem}
	key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
	col := newCollectorAll(3)
	spawnWorker(t, sys, "worker", key, workerSpec{consumer: ConsumerSettings{ResendIntervalMin: 20 * time.Millisecond}}, col)
	spawnWP(t, sys, "wp", key, WorkPullingSettings{}, WithDurableQueue[job](q))
	waitAll(t, col)
	exactlyOnce(t, col, 3)
	eventually(t, "nothing unconfirmed in the queue", func() bool {
		s, err := mem.LoadState(ctx)
		return err == nil && len(s.Unconfirmed) == 0 && s.CurrentSeqNr == 7 && s.Confirmed["wp-old"].SeqNr == 3
	})
	q.mu.Lock()
	defer q.mu.Unlock()
	stored := make(map[int]bool) // jobs stored again so far
	for _, op := range q.ops {
		var seqNr SeqNr
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
