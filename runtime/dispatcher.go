package runtime

import (
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"
)

// runnable is a mailbox that has mail: running it, on worker w, handles
// some of it.
type runnable interface {
	run(w *worker)
	// home is the worker that last ran the mailbox, or nil.
	home() *worker
}

// runQueueSize is how many scheduled mailboxes wait in the shared run queue
// before the overflow list takes the rest. Scheduling never blocks, so an
// actor that tells many idle actors can never deadlock the workers.
const runQueueSize = 16384

// localQueueSize is how many mailboxes wait in one worker's own queue; more
// go to the shared queue.
const localQueueSize = 256

// dispatcher runs scheduled mailboxes on a fixed pool of worker goroutines.
//
// Scheduled mailboxes wait in lock-free queues: one shared by all workers
// (with an overflow list behind it for mailboxes that do not fit) and, when
// the dispatcher has affinity, one per worker. Idle workers spin briefly
// before they park, as the Go scheduler's own threads do, because in
// request/response chains the next mailbox is usually scheduled within
// microseconds and waking a parked worker costs a futex round trip.
//
// Affinity: a mailbox scheduled while the worker that last ran it is busy
// waits in that worker's own queue, which the worker empties first when its
// run ends. An actor that tells another one idle therefore usually has it
// run next on the same processor, with its mail still in that processor's
// cache, and two request/response chains settle on two workers instead of
// trading their mailboxes through one queue. Spinning workers steal what a
// busy worker has queued beyond the one it takes next, and also that one
// when the busy worker has taken nothing for a few rounds (a handler that
// blocks). Dispatchers made for actors that block ([System.NewDispatcher])
// have no affinity: their mailboxes go to the first free worker.
//
// Invariant (no lost wake-ups): after a mailbox is queued, either a worker
// is spinning, or no worker is parked, or the scheduler wakes one to spin.
type dispatcher struct {
	q          *runQueue
	throughput int
	workers    int
	affinity   bool
	pool       []*worker
	wg         sync.WaitGroup

	overflowMu   sync.Mutex
	overflow     []runnable // waiting from overflowHead on, oldest first
	overflowHead int
	overflowLen  atomic.Int64 // len(overflow) - overflowHead

	spinning atomic.Int32  // workers looking for work before they park, and workers woken to do so
	idle     atomic.Int32  // workers parked or parking, less the wake tokens sent to them (see park)
	wake     chan struct{} // one token wakes one parked worker, as a spinner
	closing  atomic.Bool   // shutdown has begun: take what is queued without deferring

	// busy says the spinners' yields have been slow: goroutines keep
	// every processor busy (see noteYield).
	busy atomic.Bool
}

// worker is one of a dispatcher's goroutines.
type worker struct {
	q       *runQueue   // mailboxes waiting for this worker (affinity only)
	running atomic.Bool // running mailboxes, not looking for work
	last    []uint64    // per victim: its queue's pop count when this worker last looked (affinity only)
	still   []int       // per victim: looks in a row without a pop (affinity only)
	yields  int         // this worker's yields while spinning
	quick   int         // this worker's prompt timed yields in a row (see noteYield)
}

func newDispatcher(workers, throughput int, affinity bool) *dispatcher {
	return &dispatcher{
		q:          newRunQueue(runQueueSize),
		throughput: throughput,
		workers:    workers,
		affinity:   affinity,
	}
}

// start launches the workers.
func (d *dispatcher) start() {
	d.wake = make(chan struct{}, d.workers)
	d.pool = make([]*worker, d.workers)
	for i := range d.pool {
		w := &worker{}
		if d.affinity {
			w.q = newRunQueue(localQueueSize)
			w.last, w.still = make([]uint64, d.workers), make([]int, d.workers)
		}
		d.pool[i] = w
	}
	d.wg.Add(d.workers)
	for _, w := range d.pool {
		go d.work(w)
	}
}

// shutdown stops the workers once they have run what was scheduled before
// it, and waits for them. Call it after every actor has stopped. Each
// worker stops at the first nil it takes from the shared queue.
func (d *dispatcher) shutdown() {
	d.closing.Store(true)
	for range d.workers {
		d.push(nil)
		d.notify()
	}
	d.wg.Wait()
}

func (d *dispatcher) work(w *worker) {
	defer d.wg.Done()
	for {
		r := d.next(w)
		if r == nil {
			// Pass the wake-up on: a worker that takes its stop other than
			// as a spinner (after a run, or when about to park) would
			// otherwise leave the other stops to workers nobody wakes.
			if d.queued() > 0 {
				d.notify()
			}
			return
		}
		r.run(w)
		if d.overflowLen.Load() > 0 {
			d.drainOverflow()
		}
	}
}

// schedule queues a mailbox to run. It never blocks.
func (d *dispatcher) schedule(r runnable) {
	if d.affinity {
		if h := r.home(); h != nil && h.running.Load() && h.q.push(r) {
			// h looks at its queue when its run ends; if h stopped running
			// meanwhile, the spinner that notify makes sure of steals it.
			d.notify()
			return
		}
	}
	d.push(r)
	d.notify()
}

// yield queues a mailbox that gives up its worker after its throughput
// budget: to the shared queue, so that its worker turns to others first.
func (d *dispatcher) yield(r runnable) {
	d.push(r)
	d.notify()
}

// othersWaiting reports whether some mailbox is waiting for worker w, so a
// mailbox that used its throughput budget should give w up.
func (d *dispatcher) othersWaiting(w *worker) bool {
	return d.queued() > 0 || (w.q != nil && w.q.len() > 0)
}

// spinRounds is how many rounds in a row an idle worker finds nothing to
// do, yielding its processor in between, before it parks.
const spinRounds = 64

// staleRounds is how many rounds a spinning worker sees a busy worker's
// next mailbox wait and that worker take nothing before it steals it.
const staleRounds = 4

// maxPause is how many times a spinning worker yields between looks while
// busy workers are taking their own mail: every look pulls their queues'
// cache lines away from them.
const maxPause = 32

// next returns the next mailbox for w to run, or nil when w should stop.
func (d *dispatcher) next(w *worker) runnable {
	if r, ok := d.take(w); ok {
		return r
	}
	w.running.Store(false)
	defer w.running.Store(true)
	spinning, woken := false, false
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
			r, ok := d.spin(w, woken)
			d.spinning.Add(-1)
			spinning, woken = false, false
			if ok {
				// This may have been the only spinner: if more is queued,
				// keep a worker looking for it.
				if d.queued() > 0 {
					d.notify()
				}
				return r
			}
			// A mailbox queued after spin's last look, while this worker
			// still counted as spinning, woke nobody (see notify): look
			// again before parking, or it could wait behind a handler that
			// blocks on its home worker.
			if d.mailWaiting(w) {
				continue
			}
		}
		r, ok, woke := d.park(w)
		if ok {
			return r
		}
		spinning, woken = woke, woke
	}
}

// take pops w's own queue, then the shared one.
func (d *dispatcher) take(w *worker) (runnable, bool) {
	if w.q != nil {
		if r, ok := w.q.pop(); ok {
			return r, true
		}
	}
	return d.pop()
}

// spin looks for work until it has found none for spinRounds rounds in a
// row: in its own and the shared queue, and in the other workers' queues
// (see steal).
func (d *dispatcher) spin(w *worker, woken bool) (runnable, bool) {
	clear(w.still)
	// A worker that has just run mail yields first, so that whoever its
	// run readied (an asker with its reply) runs at once; a worker woken
	// for mail looks first, since its yield may wait (see noteYield).
	pause := 1
	if woken {
		pause = 0
	}
	for idle := 0; idle < spinRounds; {
		for range pause {
			d.spinYield(w)
		}
		if r, ok := d.take(w); ok {
			return r, true
		}
		r, ok, waiting, progress := d.steal(w)
		if ok {
			return r, true
		}
		switch {
		case !waiting:
			idle, pause = idle+1, 1
		case progress:
			idle, pause = 0, min(2*max(pause, 1), maxPause)
		default:
			idle, pause = 0, max(pause, 1)
		}
	}
	return nil, false
}

// steal takes a mailbox from another worker's queue: one it will not take
// next, or any from a worker that is not running, or the next one from a
// worker that has taken nothing for staleRounds looks. waiting says some
// busy worker has mail it is left to take; progress, that some busy worker
// has taken mail since the last look.
func (d *dispatcher) steal(w *worker) (r runnable, ok, waiting, progress bool) {
	if !d.affinity {
		return nil, false, false, false
	}
	for i, v := range d.pool {
		if v == w {
			continue
		}
		n := v.q.len()
		if n == 0 {
			w.still[i] = 0
			continue
		}
		if n == 1 && v.running.Load() && !d.closing.Load() {
			if p := v.q.popped(); p != w.last[i] {
				w.last[i], w.still[i] = p, 0
				waiting, progress = true, true
				continue
			}
			if w.still[i]++; w.still[i] < staleRounds {
				waiting = true
				continue
			}
		}
		if r, ok := v.q.pop(); ok {
			w.still[i] = 0
			return r, true, waiting, progress
		}
	}
	return nil, false, waiting, progress
}

// park blocks the worker until it is woken to spin (woken is true). It
// returns a mailbox instead when one was queued while it was parking.
func (d *dispatcher) park(w *worker) (r runnable, ok, woken bool) {
	d.idle.Add(1)
	// Look once more: a scheduler that ran before the line above saw no
	// parked worker to wake, and may have seen no spinner either.
	if r, ok := d.take(w); ok {
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
			// from now on looks at the queues again first.
			d.spinning.Add(-1)
			return
		}
		if d.idle.CompareAndSwap(n, n-1) {
			d.wake <- struct{}{} // never blocks: fewer tokens than parked workers
			return
		}
	}
}

// slowYield is how long a spinner's yield takes, at least, when the
// processors are busy; quickYields how many prompt timed yields in a row,
// by one worker, say they are no longer. At rest a yield takes microseconds.
const (
	slowYield   = time.Millisecond
	quickYields = 8
)

// timedYield is how often a spinning worker times its yield: one in
// timedYield, for reading the clock costs a spinner's round a good part
// of its length.
const timedYield = 16

// spinYield yields w's processor once, timing one yield in timedYield.
func (d *dispatcher) spinYield(w *worker) {
	if w.yields++; w.yields%timedYield != 0 {
		goruntime.Gosched()
		return
	}
	start := time.Now()
	goruntime.Gosched()
	d.noteYield(w, time.Since(start))
}

// noteYield sets busy when a spinning worker's yield took slowYield, and
// clears it after quickYields prompt ones. A spinner yields its processor
// between looks at the queues, which puts it on the Go scheduler's global
// run queue; goroutines that keep every processor busy handing it to
// each other (over unbuffered channels) leave that queue waiting for
// milliseconds, and mail left to the spinner waits with it. While busy,
// an asker does not yield (Ask): it wakes a parked worker instead.
func (d *dispatcher) noteYield(w *worker, took time.Duration) {
	if took >= slowYield {
		w.quick = 0
		if !d.busy.Load() {
			d.busy.Store(true)
		}
		return
	}
	if w.quick++; w.quick >= quickYields && d.busy.Load() {
		d.busy.Store(false)
	}
}

// wakeParked wakes a parked worker to spin, as notify does, though others
// spin: the woken worker is readied on the waker's processor, so it runs
// as soon as the waker blocks.
func (d *dispatcher) wakeParked() {
	for {
		n := d.idle.Load()
		if n <= 0 {
			return
		}
		if d.idle.CompareAndSwap(n, n-1) {
			d.spinning.Add(1)
			d.wake <- struct{}{} // never blocks: fewer tokens than parked workers
			return
		}
	}
}

// maxSpinners is how many idle workers of one dispatcher may spin at once.
func maxSpinners() int32 { return int32(max(1, goruntime.GOMAXPROCS(0)/2)) }

// mailWaiting reports whether a mailbox waits in the shared queue or in
// another worker's own queue, where only a spinner would steal it.
func (d *dispatcher) mailWaiting(w *worker) bool {
	if d.queued() > 0 {
		return true
	}
	if !d.affinity {
		return false
	}
	for _, v := range d.pool {
		if v != w && v.q.len() > 0 {
			return true
		}
	}
	return false
}

// queued is how many mailboxes wait in the shared queue.
func (d *dispatcher) queued() int { return d.q.len() + int(d.overflowLen.Load()) }

// pop takes the oldest mailbox of the shared queue, from the overflow list
// when the run queue is empty.
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

// push appends a mailbox to the shared queue, or to the overflow list when
// the queue is full.
func (d *dispatcher) push(r runnable) {
	if d.q.push(r) {
		return
	}
	d.overflowMu.Lock()
	d.overflow = append(d.overflow, r)
	d.overflowLen.Store(int64(len(d.overflow) - d.overflowHead))
	d.overflowMu.Unlock()
	// The workers may have emptied the queue since the push failed; move
	// what fits now so that nothing waits on a worker that is not coming.
	d.drainOverflow()
}

// drainOverflow moves overflowed mailboxes into the run queue while it has
// room. It costs what it moves, not what waits: it runs after every run and
// every overflowing push, so a long overflow list must not be copied each
// time.
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

// Dispatcher is a pool of workers of its own, for actors spawned
// [WithDispatcher] or entities whose [Entity].Dispatcher it is. The system
// stops it in Shutdown, after every actor.
type Dispatcher struct {
	name string
	d    *dispatcher
}

// NewDispatcher starts a pool of workers goroutines whose mailboxes handle
// up to throughput messages before yielding (as [WithThroughput]). It is
// meant for actors that block: a scheduled mailbox goes to the first free
// worker rather than waiting for the one that last ran it.
func (s *System) NewDispatcher(name string, workers, throughput int) (*Dispatcher, error) {
	if workers < 1 || throughput < 1 {
		return nil, fmt.Errorf("dispatcher %q: workers (%d) and throughput (%d) must be at least 1", name, workers, throughput)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, ErrSystemStopped
	}
	d := &Dispatcher{name: name, d: newDispatcher(workers, throughput, false)}
	d.d.start()
	s.dispatchers = append(s.dispatchers, d.d)
	return d, nil
}
