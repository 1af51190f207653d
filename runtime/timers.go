package runtime

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Timers schedules messages to the actor itself, by key. Starting a timer
// with a key in use replaces it; a cancelled or replaced timer's message is
// never handled, even if it was already queued. All of an actor's timers are
// cancelled when it stops, and when it fails and is to be restarted (before
// any restart backoff). Use it only on the actor's goroutine.
type Timers[T any] struct {
	c      *cell[T]
	active map[any]*actorTimer[T]
	gen    uint64
}

type actorTimer[T any] struct {
	msg      T
	gen      uint64
	interval time.Duration // 0 for a single timer
	t        clockwork.Timer
}

// Timers are the actor's timers.
func (ctx *Context[T]) Timers() *Timers[T] {
	x := ctx.c.ext()
	if x.timers == nil {
		x.timers = &Timers[T]{c: ctx.c, active: make(map[any]*actorTimer[T])}
	}
	return x.timers
}

// StartSingle sends msg to the actor once, after d. key must be comparable.
func (ts *Timers[T]) StartSingle(key any, msg T, d time.Duration) { ts.start(key, msg, d, 0) }

// StartPeriodic sends msg to the actor every interval, each tick interval
// after the previous one was handled (a fixed delay, so a slow actor is not
// flooded).
func (ts *Timers[T]) StartPeriodic(key any, msg T, interval time.Duration) {
	ts.start(key, msg, interval, max(interval, time.Millisecond))
}

func (ts *Timers[T]) start(key any, msg T, d, interval time.Duration) {
	ts.Cancel(key)
	ts.gen++
	t := &actorTimer[T]{msg: msg, gen: ts.gen, interval: interval}
	ts.active[key] = t
	t.t = ts.arm(key, t.gen, d)
}

func (ts *Timers[T]) arm(key any, gen uint64, d time.Duration) clockwork.Timer {
	c := ts.c
	return c.sys.clock.AfterFunc(d, func() {
		c.sendSystem(sysMsg{kind: sysTimer, key: key, gen: gen})
	})
}

// Cancel stops the timer with key, if there is one.
func (ts *Timers[T]) Cancel(key any) {
	if t, ok := ts.active[key]; ok {
		t.t.Stop()
		delete(ts.active, key)
	}
}

// CancelAll stops every timer of the actor.
func (ts *Timers[T]) CancelAll() {
	for key := range ts.active {
		ts.Cancel(key)
	}
}

// IsActive reports whether a timer with key is pending.
func (ts *Timers[T]) IsActive(key any) bool {
	_, ok := ts.active[key]
	return ok
}

// fired delivers a timer's message unless the timer was cancelled or
// replaced since it fired.
func (ts *Timers[T]) fired(key any, gen uint64) {
	t, ok := ts.active[key]
	if !ok || t.gen != gen {
		return
	}
	if t.interval == 0 {
		delete(ts.active, key)
	}
	ts.c.invoke(t.msg)
	if t.interval > 0 && ts.active[key] == t {
		t.t = ts.arm(key, gen, t.interval)
	}
}

func (c *cell[T]) timerFired(key any, gen uint64) {
	if c.x != nil && c.x.timers != nil && c.state == alive {
		c.x.timers.fired(key, gen)
	}
}

func (c *cell[T]) cancelAllTimers() {
	if c.x != nil && c.x.timers != nil {
		c.x.timers.CancelAll()
	}
	if c.x != nil && c.x.idle != nil {
		c.x.idle.stop()
	}
}
