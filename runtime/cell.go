package runtime

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/internal/deadlines"
)

// Lifecycle states of an actor. They only move forward.
const (
	alive    uint8 = iota // handling messages
	stopping              // stop begun: waiting for children, no more user messages
	dead                  // terminated: everything sent to it is a dead letter
)

// actorCell is what the runtime needs of an actor without knowing its
// message type: watch, stop and child bookkeeping across actors of any type.
type actorCell interface {
	AnyRef
	sendSystem(m sysMsg)
	isAlive() bool
	// terminated reports whether the actor has finished stopping, which
	// frees its name even before its parent has heard of it.
	terminated() bool
	system() *System
}

// parent is where an actor is spawned: another actor, the system's user
// guardian, or a sharding region. It names the child and hears of its end.
type parent interface {
	path() string
	system() *System
	// addChild reserves name for child, or says why it cannot.
	addChild(name string, child actorCell) error
	// childStopped is called once, from the child's goroutine, when the child
	// has terminated.
	childStopped(name string, child actorCell)
}

// cell is one actor: its mailbox, its behavior and its bookkeeping.
//
// The fields under mu are shared with senders. Everything else belongs to
// the goroutine that is running the mailbox, which is one goroutine at a
// time because a mailbox is scheduled at most once.
type cell[T any] struct {
	mu        sync.Mutex
	inbox     []T          // user messages not yet taken by the run loop
	sysq      []sysMsg     // system messages; they overtake user messages
	sysLen    atomic.Int32 // len(sysq), read by the run loop between messages without the lock
	scheduled bool         // the mailbox is in the run queue or running
	suspended bool         // restarting after a failure: keep mail, do not run it
	state     uint8        // alive, stopping or dead

	// Owned by the run loop.
	batch    []T // user messages taken from inbox, handled from next on
	next     int
	behavior Behavior[T]
	signals  SignalHandler[T] // behavior, when it wants signals
	stopSelf bool             // Context.Stop(Self) was called while handling a message
	x        *cellExt[T]      // rarely used parts, allocated on first use

	ctx     Context[T]
	sys     *System
	d       *dispatcher            // where the mailbox runs
	last    atomic.Pointer[worker] // the worker that last ran it, for the dispatcher's affinity
	parent  parent
	name    string
	factory func() Behavior[T]
	super   *Supervision

	postpone atomic.Bool                  // TellPostponable does not schedule the mailbox (see Context.PostponeWakeups)
	held     atomic.Pointer[heldQueue[T]] // mail sent with TellPostponable; nil until the first

	// The pad makes the cell a whole number of cache lines, so that cells
	// are allocated on line boundaries (in a size class that is a multiple
	// of 64 bytes) and no two share a line: two actors busy on two
	// processors would otherwise slow each other down through the line
	// they share (false sharing). TestCellSize keeps the size a multiple.
	_ [16]byte
}

// cellExt holds what most actors never use, so that an idle actor stays small.
type cellExt[T any] struct {
	children  map[string]actorCell
	watchers  map[actorCell]struct{}
	watching  map[actorCell]*T // nil: deliver the Terminated signal
	timers    *Timers[T]
	asks      *deadlines.Book // AskFrom's outstanding asks
	unstashed []T
	sysSpare  []sysMsg // an emptied system queue buffer, for the next (see handleSystem)
	unext     int
	log       *slog.Logger
	idle      *idleWatch

	failures     int
	lastFailure  time.Time
	restartTimer clockwork.Timer
}

func (c *cell[T]) ext() *cellExt[T] {
	if c.x == nil {
		c.x = &cellExt[T]{}
	}
	return c.x
}

// Tell queues msg for the actor. A stopping or stopped actor's mail goes to
// dead letters.
func (c *cell[T]) Tell(msg T) {
	if !c.tellAlive(msg) {
		c.sys.deadLetter(c, msg)
	}
}

// tellAlive is Tell, except that it returns false instead of making msg a
// dead letter when the actor is stopping or stopped. Checking isAlive
// before Tell would not do: the actor may begin to stop in between.
func (c *cell[T]) tellAlive(msg T) bool {
	ok, _ := c.tellWaking(msg, wakeSchedule)
	return ok
}

// wake is how a message wakes an idle actor.
type wake uint8

const (
	wakeSchedule wake = iota // Tell: schedule the mailbox on the dispatcher
	wakeDirect               // DirectAdapter: run it on the sender's goroutine
	wakeClaim                // Sharding.Run: leave it to the sender, who calls runClaimed
)

// tellWaking queues msg and, if nothing runs the mailbox, wakes the actor
// as how says; ok false means the actor is stopping or stopped. claimed
// says that wakeClaim left the idle mailbox to the caller, who must run
// it (runClaimed).
func (c *cell[T]) tellWaking(msg T, how wake) (ok, claimed bool) {
	c.mu.Lock()
	if c.state != alive {
		c.mu.Unlock()
		return false, false
	}
	c.inbox = append(c.inbox, msg)
	if c.scheduled || c.suspended {
		c.mu.Unlock()
		return true, false
	}
	c.scheduled = true
	if how != wakeSchedule && c.next >= len(c.batch) && len(c.sysq) == 0 && !c.heldReady() {
		c.swapInbox(0) // saves the caller's first take a lock
	}
	switch how {
	case wakeClaim:
		c.mu.Unlock()
		return true, true
	case wakeDirect:
		c.mu.Unlock()
		c.runDirect()
		return true, false
	}
	c.mu.Unlock()
	c.d.schedule(c)
	return true, false
}

// runClaimed runs one message of a mailbox that tellWaking left to the
// caller (wakeClaim), on the caller's goroutine, and leaves the rest to
// the dispatcher, or the mailbox idle when there is none.
func (c *cell[T]) runClaimed() {
	if !c.runOne() {
		return
	}
	if c.next >= len(c.batch) && (c.x == nil || c.x.unext >= len(c.x.unstashed)) {
		c.mu.Lock()
		if c.state == alive && len(c.inbox) == 0 && c.sysLen.Load() == 0 && !c.heldReady() {
			c.scheduled = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
	c.d.schedule(c)
}

// runDirect runs the mailbox on the caller's goroutine, for a mailbox the
// caller has marked scheduled. After the throughput budget, the rest is
// left to the dispatcher.
func (c *cell[T]) runDirect() {
	for range c.d.throughput {
		if !c.runOne() {
			return
		}
	}
	c.d.schedule(c) // still marked scheduled
}

// runOne handles the system messages queued so far and then one user
// message; false says there was none, and the mailbox is no longer
// scheduled.
func (c *cell[T]) runOne() bool {
	if c.hasSystem() {
		c.handleSystem()
	}
	msg, ok := c.take()
	if !ok {
		return false
	}
	c.invoke(msg)
	if c.stopSelf {
		c.stopSelf = false
		c.beginStop()
	}
	return true
}

// sendSystem queues a system message. To a dead actor, a watch is answered
// at once with Terminated and everything else is dropped.
func (c *cell[T]) sendSystem(m sysMsg) {
	c.mu.Lock()
	if c.state == dead {
		c.mu.Unlock()
		if m.kind == sysWatch {
			m.ref.sendSystem(sysMsg{kind: sysTerminated, ref: c})
		}
		return
	}
	c.sysq = append(c.sysq, m)
	c.sysLen.Store(int32(len(c.sysq)))
	if c.scheduled {
		c.mu.Unlock()
		return
	}
	c.scheduled = true
	c.mu.Unlock()
	c.d.schedule(c)
}

func (c *cell[T]) isAlive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == alive
}

func (c *cell[T]) terminated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == dead
}

// Path is the actor's place in the hierarchy, such as /user/orders/o-1.
func (c *cell[T]) Path() string { return c.parent.path() + "/" + c.name }

func (c *cell[T]) target() actorCell { return c }

func (c *cell[T]) path() string    { return c.Path() }
func (c *cell[T]) system() *System { return c.sys }

func (c *cell[T]) home() *worker { return c.last.Load() }

// run handles the mailbox, on worker w, until it is empty or the throughput
// budget is spent while other mailboxes wait for w.
func (c *cell[T]) run(w *worker) {
	if c.d.affinity && c.last.Load() != w {
		c.last.Store(w)
	}
	budget := c.d.throughput
	for {
		if !c.runOne() {
			return
		}
		if budget--; budget == 0 {
			if c.d.othersWaiting(w) {
				c.d.yield(c) // still marked scheduled: nobody else queues it
				return
			}
			budget = c.d.throughput
		}
	}
}

func (c *cell[T]) hasSystem() bool { return c.sysLen.Load() > 0 }

// take returns the next user message to handle, or false when there is none
// to handle now; then the mailbox is no longer scheduled. Held mail
// (TellPostponable) is taken before the inbox, unless the actor postpones
// its wake-ups; both are taken a whole queue at a time.
func (c *cell[T]) take() (T, bool) {
	var zero T
	if c.state == alive && !c.suspended {
		if x := c.x; x != nil && x.unext < len(x.unstashed) {
			msg := x.unstashed[x.unext]
			x.unstashed[x.unext] = zero
			if x.unext++; x.unext == len(x.unstashed) {
				x.unstashed, x.unext = x.unstashed[:0], 0
			}
			return msg, true
		}
		if c.next < len(c.batch) {
			msg := c.batch[c.next]
			c.batch[c.next] = zero // let the GC have it
			c.next++
			return msg, true
		}
	}
	for {
		if c.state == alive && !c.suspended && c.heldReady() {
			return c.takeHeld(), true
		}
		c.mu.Lock()
		for c.sysLen.Load() > 0 {
			c.mu.Unlock()
			c.handleSystem()
			c.mu.Lock()
		}
		if c.state == alive && !c.suspended && len(c.inbox) > 0 {
			break
		}
		if c.state != alive || c.suspended || !c.heldReady() {
			c.scheduled = false
			c.mu.Unlock()
			return zero, false
		}
		c.mu.Unlock() // held mail came meanwhile
	}
	c.swapInbox(1)
	c.mu.Unlock()
	msg := c.batch[0]
	c.batch[0] = zero
	return msg, true
}

// takeQueued is Context.TakeQueued: the rest of the batch, which take
// would hand out next, unless something is due before it.
func (c *cell[T]) takeQueued(max int, dst []T) []T {
	if c.state != alive || c.suspended || c.stopSelf || c.sysLen.Load() > 0 {
		return dst
	}
	if x := c.x; x != nil && x.unext < len(x.unstashed) {
		return dst
	}
	var zero T
	for n := 0; n < max && c.next < len(c.batch); n++ {
		dst = append(dst, c.batch[c.next])
		c.batch[c.next] = zero
		c.next++
	}
	return dst
}

// swapInbox makes the inbox the batch to handle, from message next on;
// senders append to the emptied batch buffer, so in steady state the
// mailbox allocates nothing. A buffer grown by a burst is let go. The caller
// holds mu, and the batch has been handled.
func (c *cell[T]) swapInbox(next int) {
	spent := c.batch[:0]
	if cap(spent) > 4096 {
		spent = nil
	}
	c.batch, c.inbox, c.next = c.inbox, spent, next
}

// invoke hands one message to the behavior. A panic is a failure for the
// supervision strategy to handle.
func (c *cell[T]) invoke(msg T) {
	defer c.recoverFailure()
	if c.x != nil && c.x.idle != nil {
		c.x.idle.touch(c.sys.clock.Now())
	}
	c.behavior.Receive(&c.ctx, msg)
}

func (c *cell[T]) recoverFailure() {
	if r := recover(); r != nil {
		c.fail(r)
	}
}

// handleSystem handles the system messages queued so far. An actor with
// the rare parts (timers, watches, asks: the ones that get system messages
// in steady state) reuses the queue's buffer, so that they cost no
// allocation; other actors let it go and stay small.
func (c *cell[T]) handleSystem() {
	c.mu.Lock()
	q := c.sysq
	c.sysq = nil
	if c.x != nil {
		c.sysq, c.x.sysSpare = c.x.sysSpare, nil
	}
	c.sysLen.Store(0)
	c.mu.Unlock()
	for _, m := range q {
		c.handle(m)
		if c.stopSelf {
			c.stopSelf = false
			c.beginStop()
		}
	}
	if c.x != nil && cap(q) <= maxSpareSys {
		clear(q) // let the GC have what they refer to
		c.x.sysSpare = q[:0]
	}
}

// maxSpareSys is the largest system queue buffer kept for reuse: a burst
// (a parent told of many children stopping) is let go.
const maxSpareSys = 64

func (c *cell[T]) handle(m sysMsg) {
	if c.state == dead {
		// finish ran on an earlier message of the same batch, after it had
		// answered the watches queued so far: treat the rest as mail to a
		// dead actor, or a watcher would never hear of the end.
		if m.kind == sysWatch {
			m.ref.sendSystem(sysMsg{kind: sysTerminated, ref: c})
		}
		return
	}
	switch m.kind {
	case sysStart:
		c.signalFailable(Started{})
	case sysStop:
		c.beginStop()
	case sysWatch:
		x := c.ext()
		if x.watchers == nil {
			x.watchers = make(map[actorCell]struct{})
		}
		x.watchers[m.ref] = struct{}{}
	case sysUnwatch:
		if c.x != nil {
			delete(c.x.watchers, m.ref)
		}
	case sysTerminated:
		c.watchedTerminated(m.ref)
	case sysChildStopped:
		c.removeChild(m.name, m.ref)
	case sysTimer:
		c.timerFired(m.key, m.gen)
	case sysRestart:
		c.restart()
	case sysIdle:
		c.idleCheck()
	}
}

// signal delivers a lifecycle signal whose panic is only logged: the actor
// is already on its way out.
func (c *cell[T]) signal(sig Signal) {
	if c.signals == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("panic while handling a signal", "signal", signalName(sig), "panic", r)
		}
	}()
	c.signals.OnSignal(&c.ctx, sig)
}

// signalFailable delivers a signal whose panic is a failure like a
// message's: Started and Terminated.
func (c *cell[T]) signalFailable(sig Signal) {
	if c.signals == nil || c.state != alive {
		return
	}
	defer c.recoverFailure()
	c.signals.OnSignal(&c.ctx, sig)
}

// addChild is parent.addChild for an actor; it runs on the actor's goroutine
// because only the actor's own Context spawns its children. A child that has
// terminated gives up its name at once: its watchers may already know, while
// this actor only learns it from a system message still on its way
// (removeChild then leaves the new holder alone).
func (c *cell[T]) addChild(name string, child actorCell) error {
	if c.state != alive {
		return ErrStopping
	}
	x := c.ext()
	if x.children == nil {
		x.children = make(map[string]actorCell)
	}
	if holder, taken := x.children[name]; taken && !holder.terminated() {
		return nameTakenError(c.Path(), name)
	}
	x.children[name] = child
	return nil
}

// childStopped is parent.childStopped: it tells this actor, whose goroutine
// is not the child's.
func (c *cell[T]) childStopped(name string, child actorCell) {
	c.sendSystem(sysMsg{kind: sysChildStopped, ref: child, name: name})
}

func (c *cell[T]) removeChild(name string, child actorCell) {
	if c.x == nil || c.x.children[name] != child {
		return
	}
	delete(c.x.children, name)
	if c.state == stopping && len(c.x.children) == 0 {
		c.finish()
	}
}

// logger is the system's logger with the actor's path, made on first use.
func (c *cell[T]) logger() *slog.Logger {
	x := c.ext()
	if x.log == nil {
		x.log = c.sys.log.With("actor", c.Path())
	}
	return x.log
}

// childName returns name, or a generated one when it is empty.
func childName(sys *System, name string) string {
	if name != "" {
		return name
	}
	return "$" + strconv.FormatUint(sys.ids.Add(1), 36)
}
