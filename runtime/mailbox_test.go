package runtime_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	trt "github.com/trellis-go/trellis/runtime"
)

// mailboxBlockWorker occupies one worker with an actor whose Receive waits
// until release is called; it returns once that Receive has begun, so with
// WithWorkers(1) nothing else runs until release. release is idempotent and
// also runs at cleanup, so that a failing test still shuts down.
func mailboxBlockWorker(t *testing.T, sys *trt.System) (release func()) {
	t.Helper()
	entered := make(chan struct{})
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	ref, err := trt.Spawn(sys, "", func() trt.Behavior[struct{}] {
		return trt.ReceiveFunc(func(*trt.Context[struct{}], struct{}) {
			close(entered)
			<-gate
		})
	})
	if err != nil {
		t.Fatalf("spawn blocker: %v", err)
	}
	ref.Tell(struct{}{})
	recv(t, entered)
	return release
}

// mailboxCountMsg is a message to count; a non-nil report asks for the count
// so far instead.
type mailboxCountMsg struct {
	report chan int
}

// A mailbox is never run by two workers at once, however many goroutines
// send to it, and no message is lost or handled twice.
func TestMailboxNoConcurrentReceive(t *testing.T) {
	const senders, perSender = 8, 10_000
	tests := []struct {
		name string       // what the configuration stresses
		opts []trt.Option // system options
	}{
		{"default", nil},
		// Every message gives the worker up, so the mailbox is rescheduled
		// as often as possible while senders keep scheduling it too.
		{"throughput 1, 8 workers", []trt.Option{trt.WithThroughput(1), trt.WithWorkers(8)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t, tc.opts...)
			var inHandler, overlaps atomic.Int32
			ref, err := trt.Spawn(sys, "counter", func() trt.Behavior[mailboxCountMsg] {
				count := 0 // plain int: the race detector also reports concurrent handling
				return trt.ReceiveFunc(func(_ *trt.Context[mailboxCountMsg], m mailboxCountMsg) {
					if !inHandler.CompareAndSwap(0, 1) {
						overlaps.Add(1)
						return
					}
					defer inHandler.Store(0)
					if m.report != nil {
						m.report <- count
						return
					}
					count++
					if count%64 == 0 {
						runtime.Gosched() // widen the window for a second worker to enter
					}
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range senders {
				wg.Go(func() {
					for range perSender {
						ref.Tell(mailboxCountMsg{})
					}
				})
			}
			wg.Wait()
			// Sent after every counted message was queued, so handled after them.
			report := make(chan int, 1)
			ref.Tell(mailboxCountMsg{report: report})
			if got := recv(t, report); got != senders*perSender {
				t.Errorf("handled %d messages, want %d", got, senders*perSender)
			}
			if n := overlaps.Load(); n != 0 {
				t.Errorf("Receive was entered %d times while already running", n)
			}
		})
	}
}

// mailboxSeqMsg is message seq of sender; a non-nil report asks for the
// result instead.
type mailboxSeqMsg struct {
	sender, seq int
	report      chan mailboxSeqResult
}

type mailboxSeqResult struct {
	last      []int  // the last seq handled per sender
	violation string // the first out-of-order message, if any
}

// mailboxSeqChecker is an actor that checks that each sender's messages
// arrive numbered 1, 2, 3, … with none missing, repeated or reordered.
func mailboxSeqChecker(senders int) func() trt.Behavior[mailboxSeqMsg] {
	return func() trt.Behavior[mailboxSeqMsg] {
		last := make([]int, senders)
		violation := ""
		return trt.ReceiveFunc(func(_ *trt.Context[mailboxSeqMsg], m mailboxSeqMsg) {
			if m.report != nil {
				m.report <- mailboxSeqResult{last: append([]int(nil), last...), violation: violation}
				return
			}
			if m.seq != last[m.sender]+1 && violation == "" {
				violation = fmt.Sprintf("sender %d: got %d after %d", m.sender, m.seq, last[m.sender])
			}
			last[m.sender] = m.seq
		})
	}
}

// Messages from one sender are handled in the order it sent them, whatever
// the number of workers and the throughput, from goroutines and from actors.
func TestMailboxFIFOPerSender(t *testing.T) {
	const senders, perSender = 4, 20_000
	tests := []struct {
		name       string       // the configuration
		opts       []trt.Option // system options
		fromActors bool         // senders are actors rather than goroutines
	}{
		{"2 workers", []trt.Option{trt.WithWorkers(2)}, false},
		{"throughput 1", []trt.Option{trt.WithThroughput(1)}, false},
		{"2 workers, throughput 1", []trt.Option{trt.WithWorkers(2), trt.WithThroughput(1)}, false},
		{"2 workers, throughput 1, actor senders", []trt.Option{trt.WithWorkers(2), trt.WithThroughput(1)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t, tc.opts...)
			checker, err := trt.Spawn(sys, "checker", mailboxSeqChecker(senders))
			if err != nil {
				t.Fatal(err)
			}
			send := func(id int) {
				for seq := 1; seq <= perSender; seq++ {
					checker.Tell(mailboxSeqMsg{sender: id, seq: seq})
				}
			}
			var wg sync.WaitGroup
			for id := range senders {
				if !tc.fromActors {
					wg.Go(func() { send(id) })
					continue
				}
				wg.Add(1)
				ref, err := trt.Spawn(sys, fmt.Sprintf("sender-%d", id), func() trt.Behavior[struct{}] {
					return trt.ReceiveFunc(func(*trt.Context[struct{}], struct{}) {
						send(id)
						wg.Done()
					})
				})
				if err != nil {
					t.Fatal(err)
				}
				ref.Tell(struct{}{})
			}
			wg.Wait()
			report := make(chan mailboxSeqResult, 1)
			checker.Tell(mailboxSeqMsg{report: report})
			got := recv(t, report)
			if got.violation != "" {
				t.Errorf("out of order: %s", got.violation)
			}
			for id, last := range got.last {
				if last != perSender {
					t.Errorf("sender %d: last handled %d, want %d", id, last, perSender)
				}
			}
		})
	}
}

// The throughput budget makes one worker fair: an actor with a long queue
// gives the worker up to another waiting actor after exactly Throughput
// messages, so a small budget interleaves and a large one makes long runs.
func TestMailboxFairness(t *testing.T) {
	const perActor = 1000
	tests := []struct {
		throughput int // WithThroughput; also the run length expected
	}{
		{1},
		{5},
		{100},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("throughput %d", tc.throughput), func(t *testing.T) {
			sys := newSystem(t, trt.WithWorkers(1), trt.WithThroughput(tc.throughput))
			var mu sync.Mutex
			var order []byte // which actor handled each message, in handling order
			done := make(chan struct{}, 2)
			recorder := func(id byte) func() trt.Behavior[int] {
				return func() trt.Behavior[int] {
					return trt.ReceiveFunc(func(_ *trt.Context[int], n int) {
						mu.Lock()
						order = append(order, id)
						mu.Unlock()
						if n == perActor-1 {
							done <- struct{}{}
						}
					})
				}
			}
			a, err := trt.Spawn(sys, "a", recorder('A'))
			if err != nil {
				t.Fatal(err)
			}
			b, err := trt.Spawn(sys, "b", recorder('B'))
			if err != nil {
				t.Fatal(err)
			}
			release := mailboxBlockWorker(t, sys)
			// Both queues are full before either actor runs.
			for i := range perActor {
				a.Tell(i)
			}
			for i := range perActor {
				b.Tell(i)
			}
			release()
			recv(t, done)
			recv(t, done)

			mu.Lock()
			defer mu.Unlock()
			if len(order) != 2*perActor {
				t.Fatalf("handled %d messages, want %d", len(order), 2*perActor)
			}
			// Runs while both have mail: up to the last message of whichever
			// actor finished first.
			firstDone := len(order) - 1
			for firstDone > 0 && order[firstDone-1] == order[len(order)-1] {
				firstDone--
			}
			maxRun, run := 0, 0
			for i := range firstDone {
				if i > 0 && order[i] == order[i-1] {
					run++
				} else {
					run = 1
				}
				maxRun = max(maxRun, run)
			}
			if maxRun != tc.throughput {
				t.Errorf("longest run of one actor while both had mail: %d messages, want %d (order starts %q)",
					maxRun, tc.throughput, order[:min(len(order), 40)])
			}
		})
	}
}

// A stop overtakes the user messages queued before it: they are not handled
// (except the one in progress) and are counted as dead letters.
func TestMailboxStopOvertakesUserMessages(t *testing.T) {
	const queued = 100
	tests := []struct {
		name          string // where the worker is held while the mail is queued
		blockInTarget bool   // the target's own first message holds the worker, so the rest wait in its current batch
		wantHandled   int    // user messages the target handles
	}{
		{"worker held by another actor", false, 0},
		{"worker held by the target's first message", true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t, trt.WithWorkers(1))
			var handled atomic.Int32
			entered := make(chan struct{})
			gate := make(chan struct{})
			var once sync.Once
			releaseTarget := func() { once.Do(func() { close(gate) }) }
			t.Cleanup(releaseTarget)
			target, err := trt.Spawn(sys, "target", func() trt.Behavior[int] {
				return trt.ReceiveFunc(func(_ *trt.Context[int], n int) {
					handled.Add(1)
					if n == 0 && tc.blockInTarget {
						close(entered)
						<-gate
					}
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			terminated := lifecycleWatch(t, sys, target)
			release := mailboxBlockWorker(t, sys)
			for i := range queued {
				target.Tell(i)
			}
			before := sys.DeadLetters()
			if tc.blockInTarget {
				release()
				recv(t, entered)
				sys.Stop(target)
				releaseTarget()
			} else {
				sys.Stop(target)
				release()
			}
			recv(t, terminated)
			if got := int(handled.Load()); got != tc.wantHandled {
				t.Errorf("target handled %d messages after the stop was queued, want %d", got, tc.wantHandled)
			}
			if got, want := sys.DeadLetters()-before, uint64(queued-tc.wantHandled); got != want {
				t.Errorf("dead letters: %d, want %d", got, want)
			}
		})
	}
}

// A message to a stopped actor is a dead letter, counted at once.
func TestMailboxTellToStoppedActorIsDeadLetter(t *testing.T) {
	sys := newSystem(t)
	p := newProbe[int](t, sys, "target")
	terminated := lifecycleWatch(t, sys, p.Ref)
	sys.Stop(p.Ref)
	recv(t, terminated)
	before := sys.DeadLetters()
	for i := range 3 {
		p.Ref.Tell(i)
		if got, want := sys.DeadLetters()-before, uint64(i+1); got != want {
			t.Fatalf("after %d tells to a stopped actor: %d dead letters, want %d", i+1, got, want)
		}
	}
	p.ExpectNone(t, 0) // a stopped actor handles nothing
}

// Scheduling never blocks and never loses a mailbox: an actor that wakes
// more idle actors than the run queue holds gets every one of them run.
func TestMailboxRunQueueOverflow(t *testing.T) {
	const idle = 50_000 // more than the 16,384 slots of the run queue
	tests := []struct {
		name string       // the configuration
		opts []trt.Option // system options
	}{
		// The fan-out holds the only worker, so the queue must overflow.
		{"1 worker", []trt.Option{trt.WithWorkers(1)}},
		{"default workers", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t, tc.opts...)
			var handled atomic.Int64
			refs := make([]trt.Ref[struct{}], idle)
			for i := range refs {
				ref, err := trt.Spawn(sys, "", func() trt.Behavior[struct{}] {
					return trt.ReceiveFunc(func(*trt.Context[struct{}], struct{}) { handled.Add(1) })
				})
				if err != nil {
					t.Fatal(err)
				}
				refs[i] = ref
			}
			fanout, err := trt.Spawn(sys, "fanout", func() trt.Behavior[struct{}] {
				return trt.ReceiveFunc(func(*trt.Context[struct{}], struct{}) {
					for _, ref := range refs {
						ref.Tell(struct{}{})
					}
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			fanout.Tell(struct{}{})
			eventually(t, "every idle actor handled its message", func() bool { return handled.Load() == idle })
			// More would mean a mailbox ran its message twice.
			if got := handled.Load(); got != idle {
				t.Errorf("handled %d, want %d", got, idle)
			}
		})
	}
}

// A burst of a million messages from one goroutine is handled completely
// and in order, across the mailbox's buffer swaps.
func TestMailboxLargeBurst(t *testing.T) {
	const n = 1_000_000
	sys := newSystem(t)
	done := make(chan string, 1) // the first disorder, or "ok" once all arrived in order
	ref, err := trt.Spawn(sys, "sink", func() trt.Behavior[int] {
		next := 0
		return trt.ReceiveFunc(func(_ *trt.Context[int], m int) {
			report := ""
			switch {
			case m != next:
				report = fmt.Sprintf("got %d, want %d", m, next)
			case m == n-1:
				report = "ok"
			default:
				next++
				return
			}
			next = m + 1
			select {
			case done <- report:
			default:
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ref.Tell(i)
	}
	if msg := recv(t, done); msg != "ok" {
		t.Fatal(msg)
	}
}
