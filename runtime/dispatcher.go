package runtime

import (
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
)

// runnable is a mailbox that has mail: running it handles some of it.
type runnable interface{ run() }

// runQueueSize is how many scheduled mailboxes wait in the run queue before
// the overflow list takes the rest. Scheduling never blocks, so an actor
// that tells many idle actors can never deadlock the workers.
const runQueueSize = 16384

// dispatcher runs scheduled mailboxes on a fixed pool of worker goroutines.
//
// Scheduled mailboxes wait in a lock-free run queue (mailboxes that do not
// fit wait in an overflow list that every worker drains after each run).
// Idle workers spin briefly before they park, as the Go scheduler's own
// threads do, because in request/response chains the next mailbox is
// usually scheduled within microseconds and waking a parked worker costs a
// futex round trip.
//
// Scheduling prefers locality: while the queue holds no more mailboxes than
// there are workers busy running one, a spinning worker leaves them to the
// busy workers, which take them when their runs end. An actor that tells
// another one idle therefore usually has it run next on the same processor,
// with its mail still in that processor's cache, instead of handing it to
// another processor for every message of a request/response chain. A worker
// that stays busy (a handler that blocks) does not hold others up for long:
// a spinner takes a mailbox that nobody has popped for a few rounds.
//
// Invariant (no lost wake-ups): after a mailbox is queued, either a worker
// is spinning, or no worker is parked, or the scheduler wakes one to spin.
type dispatcher struct {
	q          *runQueue
	throughput int
	workers    int
	wg         sync.WaitGroup

	overflowMu   sync.Mutex
	overflow     []runnable // waiting from overflowHead on, oldest first
	overflowHead int
	overflowLen  atomic.Int64 // len(overflow) - overflowHead

	spinning atomic.Int32  // workers looking for work before they park, and workers woken to do so
	idle     atomic.Int32  // workers parked or parking, less the wake tokens sent to them (see park)
	wake     chan struct{} // one token wakes one parked worker, as a spinner
	closing  atomic.Bool   // shutdown has begun: take what is queued without deferring
}

func newDispatcher(workers, throughput int) *dispatcher {
	return &dispatcher{
		q:          newRunQueue(runQueueSize),
		throughput: throughput,
		workers:    workers,
	}
}

// start launches the workers.
func (d *dispatcher) start() {
	d.wake = make(chan struct{}, d.workers)
	d.wg.Add(d.workers)
	for range d.workers {
		go d.work()
	}
}

// shutdown stops the workers once they have run what was scheduled before
// it, and waits for them. Call it after every actor has stopped. Each
// worker stops at the first nil it takes from the queue.
func (d *dispatcher) shutdown() {
	d.closing.Store(true)
	for range d.workers {
		d.schedule(nil)
	}
	d.wg.Wait()
}

func (d *dispatcher) work() {
	defer d.wg.Done()
	for {
		r := d.next()
		if r == nil {
			return
		}
		r.run()
		if d.overflowLen.Load() > 0 {
			d.drainOverflow()
		}
	}
}

// spinRounds is how many rounds in a row an idle worker finds the queue
// empty, yielding its processor in between, before it parks.
const spinRounds = 64

// staleRounds is how many rounds a spinning worker sees a queued mailbox and
// nobody popping anything before it takes the mailbox itself rather than
// leave it to a busy worker.
const staleRounds = 4

// maxPause is how many times a spinning worker yields between looks at a
// queue whose mail the busy workers are taking.
const maxPause = 32

// next returns the next mailbox to run, or nil when the worker should stop.
func (d *dispatcher) next() runnable {
	if r, ok := d.pop(); ok {
		return r
	}
	spinning := false
	for {
		if !spinning {
			// At most maxSpinners workers spin at once (like the Go
			// scheduler's spinning threads): a large pool of idle workers
			// must not burn the processors the rest of the program needs.
			if d.spinning.Add(1) <= maxSpinners() {
				spinning = true
			} else {
				d.spinning.Add(-1)
			}
		}
		if spinning {
			r, ok := d.spin()
			d.spinning.Add(-1)
			spinning = false
			if ok {
				// This may have been the only spinner: if more is queued,
				// keep a worker looking for it.
				if d.queued() > 0 {
					d.notify()
				}
				return r
			}
		}
		r, ok, woken := d.park()
		if ok {
			return r
		}
		spinning = woken
	}
}

// spin looks for work until the queue has been empty for spinRounds rounds
// in a row. It leaves queued mailboxes to the busy workers while they can
// take them all (see dispatcher), unless nobody pops for staleRounds rounds.
func (d *dispatcher) spin() (runnable, bool) {
	lastPopped, still, pause := d.q.popped(), 0, 1
	for empty := 0; empty < spinRounds; {
		for range pause {
			goruntime.Gosched()
		}
		n := d.queued()
		if n == 0 {
			empty, still, pause = empty+1, 0, 1
			continue
		}
		empty = 0
		if n <= d.busy() && !d.closing.Load() {
			if p := d.q.popped(); p != lastPopped {
				// The busy workers are taking the mail: look less often,
				// for every look pulls the queue's cache lines away from them.
				lastPopped, still, pause = p, 0, min(2*pause, maxPause)
				continue
			}
			if still++; still < staleRounds {
				continue
			}
		}
		if r, ok := d.pop(); ok {
			return r, true
		}
	}
	return nil, false
}

// park blocks the worker until it is woken to spin (woken is true). It
// returns a mailbox instead when one was queued while it was parking.
func (d *dispatcher) park() (r runnable, ok, woken bool) {
	d.idle.Add(1)
	// Look once more: a scheduler that ran before the line above saw no
	// parked worker to wake, and may have seen no spinner either.
	if r, ok := d.pop(); ok {
		// idle may go below zero here for a moment: a scheduler that
		// counted on this worker has sent a token, and the next worker to
		// park takes it and spins in this one's place.
		d.idle.Add(-1)
		return r, true, false
	}
	<-d.wake
	return nil, false, true
}

// notify wakes a parked worker to spin when nobody is looking for work.
func (d *dispatcher) notify() {
	if d.spinning.Load() > 0 || d.idle.Load() <= 0 {
		return
	}
	if !d.spinning.CompareAndSwap(0, 1) {
		return // another worker has started to spin
	}
	for {
		n := d.idle.Load()
		if n <= 0 {
			// Every parked worker woke up meanwhile; a worker that parks
			// from now on looks at the queue again first.
			d.spinning.Add(-1)
			return
		}
		if d.idle.CompareAndSwap(n, n-1) {
			d.wake <- struct{}{} // never blocks: fewer tokens than parked workers
			return
		}
	}
}

// busy is how many workers are running a mailbox: they look at the queue
// when their runs end.
func (d *dispatcher) busy() int {
	return d.workers - int(max(d.idle.Load(), 0)) - int(d.spinning.Load())
}

// queued is how many mailboxes wait for a worker.
func (d *dispatcher) queued() int { return d.q.len() + int(d.overflowLen.Load()) }

// pop takes the oldest queued mailbox, from the overflow list when the run
// queue is empty.
func (d *dispatcher) pop() (runnable, bool) {
	if r, ok := d.q.pop(); ok {
		return r, true
	}
	if d.overflowLen.Load() == 0 {
		return nil, false
	}
	d.drainOverflow()
	return d.q.pop()
}

// maxSpinners is how many idle workers of one dispatcher may spin at once.
func maxSpinners() int32 { return int32(max(1, goruntime.GOMAXPROCS(0)/2)) }

// schedule queues a mailbox to run. It never blocks.
func (d *dispatcher) schedule(r runnable) {
	if !d.q.push(r) {
		d.overflowMu.Lock()
		d.overflow = append(d.overflow, r)
		d.overflowLen.Store(int64(len(d.overflow) - d.overflowHead))
		d.overflowMu.Unlock()
		// The workers may have emptied the queue since the push failed;
		// move what fits now so that nothing waits on a worker that is
		// not coming.
		d.drainOverflow()
	}
	d.notify()
}

// drainOverflow moves overflowed mailboxes into the run queue while it has
// room. It costs what it moves, not what waits: it runs after every run and
// every overflowing schedule, so a long overflow list must not be copied
// each time.
func (d *dispatcher) drainOverflow() {
	d.overflowMu.Lock()
	defer d.overflowMu.Unlock()
	head := d.overflowHead
	for head < len(d.overflow) && d.q.push(d.overflow[head]) {
		d.overflow[head] = nil
		head++
	}
	switch {
	case head == len(d.overflow):
		d.overflow, head = d.overflow[:0], 0
	case head > len(d.overflow)/2:
		// Compact once half is spent, so the list cannot creep forward forever.
		n := copy(d.overflow, d.overflow[head:])
		clear(d.overflow[n:])
		d.overflow, head = d.overflow[:n], 0
	}
	d.overflowHead = head
	d.overflowLen.Store(int64(len(d.overflow) - head))
}

// othersWaiting reports whether some mailbox is waiting for a worker, so a
// mailbox that used its throughput budget should give its worker up.
func (d *dispatcher) othersWaiting() bool { return d.queued() > 0 }

// Dispatcher is a pool of workers of its own, for actors spawned
// [WithDispatcher] or entities whose [Entity].Dispatcher it is. The system
// stops it in Shutdown, after every actor.
type Dispatcher struct {
	name string
	d    *dispatcher
}

// NewDispatcher starts a pool of workers goroutines whose mailboxes handle
// up to throughput messages before yielding (as [WithThroughput]).
func (s *System) NewDispatcher(name string, workers, throughput int) (*Dispatcher, error) {
	if workers < 1 || throughput < 1 {
		return nil, fmt.Errorf("dispatcher %q: workers (%d) and throughput (%d) must be at least 1", name, workers, throughput)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, ErrSystemStopped
	}
	d := &Dispatcher{name: name, d: newDispatcher(workers, throughput)}
	d.d.start()
	s.dispatchers = append(s.dispatchers, d.d)
	return d, nil
}
