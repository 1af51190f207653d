package runtime

import (
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
)

// runnable is a mailbox that has mail: running it handles some of it.
type runnable interface{ run() }

// runQueueSize is how many scheduled mailboxes wait in the channel before
// the overflow list takes the rest. Scheduling never blocks, so an actor
// that tells many idle actors can never deadlock the workers.
const runQueueSize = 16384

// dispatcher runs scheduled mailboxes on a fixed pool of worker goroutines.
//
// The run queue is a buffered channel: a worker waiting on it is handed the
// next mailbox directly, and Go's scheduler runs that worker on the sender's
// processor next, which is what makes actor-to-actor request/response as
// cheap as a channel round trip. Mailboxes that do not fit go to an overflow
// list that every worker drains after each run.
type dispatcher struct {
	runq       chan runnable
	throughput int
	workers    int
	wg         sync.WaitGroup

	overflowMu   sync.Mutex
	overflow     []runnable // waiting from overflowHead on, oldest first
	overflowHead int
	overflowLen  atomic.Int64 // len(overflow) - overflowHead

	spinning atomic.Int32 // workers looking for work before they park
}

func newDispatcher(workers, throughput int) *dispatcher {
	return &dispatcher{
		runq:       make(chan runnable, runQueueSize),
		throughput: throughput,
		workers:    workers,
	}
}

// start launches the workers.
func (d *dispatcher) start() {
	d.wg.Add(d.workers)
	for range d.workers {
		go d.work()
	}
}

// shutdown stops the workers once they have run what was scheduled before
// it, and waits for them. Call it after every actor has stopped.
func (d *dispatcher) shutdown() {
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

// spinRounds is how many times an idle worker looks for work, yielding its
// processor in between, before it parks on the run queue.
const spinRounds = 64

// next returns the next mailbox to run. A worker that finds none spins
// briefly before it parks: in request/response chains the next mailbox is
// usually scheduled within microseconds, and a spinning worker takes it
// from the channel's buffer, where a parked one would have to be woken
// (a futex round trip) for every message.
//
// At most maxSpinners workers spin at once (like the Go scheduler's own
// spinning threads): a large pool of idle workers must not burn the
// processors that the rest of the program needs.
func (d *dispatcher) next() runnable {
	select {
	case r := <-d.runq:
		return r
	default:
	}
	if d.spinning.Add(1) <= maxSpinners() {
		for range spinRounds {
			goruntime.Gosched()
			select {
			case r := <-d.runq:
				d.spinning.Add(-1)
				return r
			default:
			}
		}
	}
	d.spinning.Add(-1)
	return <-d.runq
}

// maxSpinners is how many idle workers of one dispatcher may spin at once.
func maxSpinners() int32 { return int32(max(1, goruntime.GOMAXPROCS(0)/2)) }

// schedule queues a mailbox to run. It never blocks.
func (d *dispatcher) schedule(r runnable) {
	select {
	case d.runq <- r:
		return
	default:
	}
	d.overflowMu.Lock()
	d.overflow = append(d.overflow, r)
	d.overflowLen.Store(int64(len(d.overflow) - d.overflowHead))
	d.overflowMu.Unlock()
	// The workers may have emptied the channel since the send failed; move
	// what fits now so that nothing waits on a worker that is not coming.
	d.drainOverflow()
}

// drainOverflow moves overflowed mailboxes into the channel while it has
// room. It costs what it moves, not what waits: it runs after every run and
// every overflowing schedule, so a long overflow list must not be copied
// each time.
func (d *dispatcher) drainOverflow() {
	d.overflowMu.Lock()
	defer d.overflowMu.Unlock()
	head := d.overflowHead
move:
	for head < len(d.overflow) {
		select {
		case d.runq <- d.overflow[head]:
			d.overflow[head] = nil
			head++
		default:
			break move
		}
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
func (d *dispatcher) othersWaiting() bool {
	return len(d.runq) > 0 || d.overflowLen.Load() > 0
}

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
