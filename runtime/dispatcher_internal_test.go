package runtime

import (
	"context"
	"slices"
	"testing"
	"time"
)

// fakeMailbox is a runnable that records nothing: the tests below only
// watch where the dispatcher queues it.
type fakeMailbox struct{ last *worker }

func (m *fakeMailbox) run(*worker)   {}
func (m *fakeMailbox) home() *worker { return m.last }

// newIdleDispatcher is a dispatcher with its workers' queues but no
// goroutines, so a test can place mailboxes and look at the queues.
func newIdleDispatcher(workers int, affinity bool) *dispatcher {
	d := newDispatcher(workers, 5, affinity)
	d.wake = make(chan struct{}, workers)
	d.pool = make([]*worker, workers)
	for i := range d.pool {
		d.pool[i] = &worker{last: make([]uint64, workers), still: make([]int, workers)}
		if affinity {
			d.pool[i].q = newRunQueue(localQueueSize)
		}
	}
	return d
}

// A mailbox waits in the queue of the worker that last ran it while that
// worker runs, and in the shared queue otherwise: when it has no home, its
// home is idle, the dispatcher has no affinity, or the home's queue is full.
func TestScheduleAffinity(t *testing.T) {
	tests := []struct {
		name       string // the case
		affinity   bool   // the dispatcher's affinity
		homed      bool   // the mailbox has a home worker
		running    bool   // that worker is running
		preload    int    // mailboxes already in the home's queue
		wantLocal  int    // then in the home's queue
		wantShared int    // then in the shared queue
	}{
		{"home running", true, true, true, 0, 1, 0},
		{"home idle", true, true, false, 0, 0, 1},
		{"no home", true, false, true, 0, 0, 1},
		{"home queue full", true, true, true, localQueueSize, localQueueSize, 1},
		{"no affinity", false, true, true, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newIdleDispatcher(2, tc.affinity)
			w := d.pool[0]
			w.running.Store(tc.running)
			for range tc.preload {
				w.q.push(&fakeMailbox{})
			}
			m := &fakeMailbox{}
			if tc.homed {
				m.last = w
			}
			d.schedule(m)
			local := 0
			if w.q != nil {
				local = w.q.len()
			}
			if local != tc.wantLocal || d.queued() != tc.wantShared {
				t.Fatalf("home queue %d, shared %d; want %d and %d", local, d.queued(), tc.wantLocal, tc.wantShared)
			}
		})
	}
}

// A spinning worker leaves a running worker the one mailbox it takes next,
// steals what waits beyond it, steals from a worker that is not running,
// and steals the one as well once the running worker has taken nothing for
// staleRounds looks.
func TestStealRules(t *testing.T) {
	d := newIdleDispatcher(2, true)
	thief, victim := d.pool[0], d.pool[1]
	victim.running.Store(true)

	victim.q.push(&fakeMailbox{last: victim})
	for look := 1; look < staleRounds; look++ {
		if _, ok, waiting, _ := d.steal(thief); ok || !waiting {
			t.Fatalf("look %d: stole the next mailbox of a running worker (waiting %t)", look, waiting)
		}
	}
	if _, ok, _, _ := d.steal(thief); !ok {
		t.Fatalf("after %d looks without a pop the mailbox was not stolen", staleRounds)
	}

	victim.q.push(&fakeMailbox{last: victim})
	victim.q.push(&fakeMailbox{last: victim})
	if _, ok, _, _ := d.steal(thief); !ok {
		t.Fatal("the mailbox beyond the next one was not stolen")
	}
	if _, ok, _, _ := d.steal(thief); ok {
		t.Fatal("the running worker's next mailbox was stolen at once")
	}
	victim.q.pop() // the victim takes its next mailbox: progress
	victim.q.push(&fakeMailbox{last: victim})
	if _, ok, _, progress := d.steal(thief); ok || !progress {
		t.Fatalf("after the victim took one: stolen %t, progress %t; want false, true", ok, progress)
	}

	victim.running.Store(false)
	if _, ok, _, _ := d.steal(thief); !ok {
		t.Fatal("a worker that is not running kept its mailbox")
	}
}

// A slow yield marks the dispatcher busy; quickYields prompt ones in a row,
// by one worker, clear it; a slow one in between starts the count again.
func TestNoteYield(t *testing.T) {
	quick, slow := time.Microsecond, slowYield
	tests := []struct {
		name string
		took []time.Duration // one worker's timed yields, in order
		busy bool            // then
	}{
		{"prompt yields", []time.Duration{quick, quick}, false},
		{"one slow yield", []time.Duration{quick, slow}, true},
		{"fewer prompt yields after it than clear it", append([]time.Duration{slow}, slices.Repeat([]time.Duration{quick}, quickYields-1)...), true},
		{"enough prompt yields after it", append([]time.Duration{slow}, slices.Repeat([]time.Duration{quick}, quickYields)...), false},
		{"a slow one among them", append(append([]time.Duration{slow}, slices.Repeat([]time.Duration{quick}, quickYields-1)...), slow, quick), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newIdleDispatcher(2, true)
			for _, took := range tc.took {
				d.noteYield(d.pool[0], took)
			}
			if got := d.busy.Load(); got != tc.busy {
				t.Errorf("busy = %v, want %v", got, tc.busy)
			}
		})
	}
}

// wakeParked hands a parked worker a wake token and counts it as spinning,
// though others spin; with no worker parked it does nothing.
func TestWakeParked(t *testing.T) {
	d := newIdleDispatcher(2, true)
	d.spinning.Store(1) // a spinner notify would leave the mail to
	d.idle.Store(1)
	d.wakeParked()
	if len(d.wake) != 1 || d.idle.Load() != 0 || d.spinning.Load() != 2 {
		t.Fatalf("after waking: %d tokens, %d parked, %d spinning; want 1, 0, 2", len(d.wake), d.idle.Load(), d.spinning.Load())
	}
	d.wakeParked()
	if len(d.wake) != 1 || d.idle.Load() != 0 || d.spinning.Load() != 2 {
		t.Fatalf("with none parked: %d tokens, %d parked, %d spinning; want 1, 0, 2", len(d.wake), d.idle.Load(), d.spinning.Load())
	}
}

// Asks made while the dispatcher is busy (each wakes a parked worker, if
// one is parked, instead of yielding) are all answered, and the workers'
// counts balance once they are idle again: no wake-up is lost or left
// over.
func TestAskWhileBusy(t *testing.T) {
	sys := NewSystem("busy")
	t.Cleanup(func() { _ = sys.Shutdown(context.Background()) })
	type req struct {
		n     int
		reply Ref[int]
	}
	echo, err := Spawn(sys, "", func() Behavior[req] {
		return ReceiveFunc(func(_ *Context[req], r req) { r.reply.Tell(r.n + 1) })
	})
	if err != nil {
		t.Fatal(err)
	}
	d := sys.d
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 1000 {
		d.busy.Store(true)
		got, err := Ask(ctx, echo, func(reply Ref[int]) req { return req{n: i, reply: reply} })
		if err != nil || got != i+1 {
			t.Fatalf("ask %d while busy: %d, %v", i, got, err)
		}
	}
	d.busy.Store(false)
	for deadline := time.Now().Add(10 * time.Second); d.spinning.Load() != 0 || d.idle.Load() != int32(d.workers); {
		if time.Now().After(deadline) {
			t.Fatalf("idle workers: spinning %d, parked %d of %d", d.spinning.Load(), d.idle.Load(), d.workers)
		}
		time.Sleep(time.Millisecond)
	}
}
