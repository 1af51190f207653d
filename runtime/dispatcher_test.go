package runtime_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	trt "github.com/trellis-go/trellis/runtime"
)

// An actor on a dispatcher of its own keeps working while every worker of
// the default dispatcher is blocked, for plain actors and sharded entities;
// Shutdown stops that dispatcher's workers too (goleak checks in TestMain).
func TestDispatcherIsolatesBlockingActors(t *testing.T) {
	sys := newSystem(t, trt.WithWorkers(1))
	io, err := sys.NewDispatcher("io", 2, 5)
	if err != nil {
		t.Fatal(err)
	}

	gate, entered := make(chan struct{}), make(chan struct{})
	blocker, err := trt.Spawn(sys, "blocker", func() trt.Behavior[int] {
		return trt.ReceiveFunc(func(*trt.Context[int], int) { close(entered); <-gate })
	})
	if err != nil {
		t.Fatal(err)
	}
	defer close(gate)
	blocker.Tell(1)
	recv(t, entered) // the default dispatcher's only worker is now held

	got := make(chan string, 2)
	onIO, err := trt.Spawn(sys, "on-io", func() trt.Behavior[string] {
		return trt.ReceiveFunc(func(_ *trt.Context[string], m string) { got <- m })
	}, trt.WithDispatcher(io))
	if err != nil {
		t.Fatal(err)
	}
	onIO.Tell("actor")
	if m := recv(t, got); m != "actor" {
		t.Fatalf("got %q", m)
	}

	shards, err := trt.InitSharding(sys, trt.Entity[string]{
		Key:        trt.NewEntityTypeKey[string]("io-entity"),
		Dispatcher: io,
		Create: func(id string) trt.Behavior[string] {
			return trt.ReceiveFunc(func(_ *trt.Context[string], m string) { got <- id + ":" + m })
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	shards.EntityRef("e1").Tell("entity")
	if m := recv(t, got); m != "e1:entity" {
		t.Fatalf("got %q", m)
	}
}

// NewDispatcher refuses pools that could never run anything, and a system
// that is shut down.
func TestDispatcherErrors(t *testing.T) {
	sys := newSystem(t)
	tests := []struct {
		name       string // the case
		workers    int    // requested workers
		throughput int    // requested throughput
	}{
		{"no workers", 0, 5},
		{"no throughput", 2, 0},
	}
	for _, tc := range tests {
		if _, err := sys.NewDispatcher(tc.name, tc.workers, tc.throughput); err == nil {
			t.Errorf("%s: NewDispatcher(%d, %d) succeeded", tc.name, tc.workers, tc.throughput)
		}
	}
	if err := sys.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.NewDispatcher("late", 1, 1); !errors.Is(err, trt.ErrSystemStopped) {
		t.Errorf("after Shutdown: got %v, want ErrSystemStopped", err)
	}
}

// A mailbox scheduled by an actor whose handler then blocks is not left
// waiting for that busy worker: the dispatcher prefers to leave it to the
// worker that scheduled it, but a spinning worker takes it once nobody has
// popped anything for a few rounds.
func TestDispatcherBusyWorkerDoesNotHoldScheduledMailbox(t *testing.T) {
	sys := newSystem(t, trt.WithWorkers(2))
	ran := make(chan int, 1)
	b, err := trt.Spawn(sys, "b", func() trt.Behavior[int] {
		return trt.ReceiveFunc(func(_ *trt.Context[int], m int) { ran <- m })
	})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	defer close(gate)
	a, err := trt.Spawn(sys, "a", func() trt.Behavior[int] {
		return trt.ReceiveFunc(func(_ *trt.Context[int], m int) {
			b.Tell(m)
			<-gate // holds this worker while b waits in the run queue
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		a.Tell(i)
		if got := recv(t, ran); got != i {
			t.Fatalf("b got %d, want %d", got, i)
		}
		gate <- struct{}{} // release a for the next round
	}
}

// Bursts of mail separated by idle periods, from many goroutines to many
// actors, are all handled: workers park when idle and are woken again, and
// no wake-up is lost between a worker deciding to park and a sender
// scheduling a mailbox.
func TestDispatcherNoLostWakeups(t *testing.T) {
	for _, workers := range []int{1, 2, 4, 16} {
		sys := newSystem(t, trt.WithWorkers(workers))
		const actors, senders, perSender, bursts = 8, 4, 50, 30
		var handled atomic.Int64
		refs := make([]trt.Ref[int], actors)
		for i := range refs {
			ref, err := trt.Spawn(sys, "", func() trt.Behavior[int] {
				return trt.ReceiveFunc(func(_ *trt.Context[int], _ int) { handled.Add(1) })
			})
			if err != nil {
				t.Fatal(err)
			}
			refs[i] = ref
		}
		want := int64(0)
		for burst := range bursts {
			var wg sync.WaitGroup
			for s := range senders {
				wg.Go(func() {
					for i := range perSender {
						refs[(s+i+burst)%actors].Tell(i)
					}
				})
			}
			wg.Wait()
			want += senders * perSender
			eventually(t, fmt.Sprintf("%d workers, burst %d: %d messages handled", workers, burst, want),
				func() bool { return handled.Load() == want })
		}
	}
}

// chainMsg is passed along a ring of actors until its hops run out.
type chainMsg struct {
	hops  int
	block bool // the handler that gets it blocks a little first
}

// Chains of actor-to-actor tells, which the dispatcher keeps on the worker
// that scheduled them, run to the end through idle periods, handlers that
// block, and workers stealing from each other: no mailbox is left in a
// worker's own queue without someone coming for it.
func TestDispatcherActorChains(t *testing.T) {
	for _, workers := range []int{2, 3, 8} {
		sys := newSystem(t, trt.WithWorkers(workers))
		const ringSize, chains, hops, rounds = 6, 5, 300, 10
		finished := make(chan struct{}, chains)
		ring := make([]trt.Ref[chainMsg], ringSize)
		for i := range ring {
			ref, err := trt.Spawn(sys, "", func() trt.Behavior[chainMsg] {
				return trt.ReceiveFunc(func(_ *trt.Context[chainMsg], m chainMsg) {
					if m.block {
						blockBriefly()
					}
					if m.hops == 0 {
						finished <- struct{}{}
						return
					}
					ring[(i+1)%ringSize].Tell(chainMsg{hops: m.hops - 1, block: m.hops%97 == 0})
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			ring[i] = ref
		}
		for round := range rounds {
			for c := range chains {
				ring[c%ringSize].Tell(chainMsg{hops: hops})
			}
			for range chains {
				select {
				case <-finished:
				case <-time.After(10 * time.Second):
					t.Fatalf("%d workers, round %d: a chain did not finish within 10s", workers, round)
				}
			}
		}
	}
}

// blockBriefly holds the worker the way a short blocking call would.
func blockBriefly() {
	done := make(chan struct{})
	go func() { close(done) }()
	<-done
}

// Shutdown stops every worker however they are spread between running,
// spinning and parked when the stops are queued: a worker that takes its
// stop after a run or while about to park passes the wake-up on; a lost
// wake-up hangs about one shutdown in a thousand with 4 or more workers.
func TestDispatcherShutdownStopsEveryWorker(t *testing.T) {
	// More processors than this machine may have make the workers' states
	// at the moment of shutdown far more varied (a lost wake-up needs 4 or more).
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(8))
	rounds := 5000
	if raceEnabled || testing.Short() {
		rounds = 500
	}
	for i := range rounds {
		sys := trt.NewSystem("shutdown", trt.WithWorkers(8))
		done := make(chan struct{})
		ref, err := trt.Spawn(sys, "a", func() trt.Behavior[int] {
			return trt.ReceiveFunc(func(_ *trt.Context[int], n int) {
				if n == 10 {
					close(done)
				}
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 10; n++ {
			ref.Tell(n)
		}
		recv(t, done)
		stopped := make(chan error, 1)
		go func() { stopped <- sys.Shutdown(context.Background()) }()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Shutdown did not return within 10s", i)
		}
	}
}
