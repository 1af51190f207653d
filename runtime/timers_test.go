package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	trt "github.com/trellis-go/trellis/runtime"
)

// timersBlocker is a fake clock: *clockwork.FakeClock or *timersClock.
type timersBlocker interface {
	BlockUntilContext(ctx context.Context, n int) error
}

// timersPending reports whether fc has at least n pending timers, without
// waiting: a cancelled context makes BlockUntilContext answer at once.
func timersPending(fc timersBlocker, n int) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return fc.BlockUntilContext(ctx, n) == nil
}

// timersAwait waits until fc has at least n pending timers.
func timersAwait(t *testing.T, fc timersBlocker, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d pending timers: %v", n, err)
	}
}

// timersClock is a fake clock that says when the callback of one of its
// AfterFunc timers has returned, so the message that the callback sends is
// queued: clockwork runs the callbacks on their own goroutines.
type timersClock struct {
	*clockwork.FakeClock
	fired chan time.Duration // the duration of each AfterFunc timer whose callback returned
}

func newTimersClock() *timersClock {
	return &timersClock{FakeClock: clockwork.NewFakeClock(), fired: make(chan time.Duration, 1024)}
}

func (c *timersClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	return c.FakeClock.AfterFunc(d, func() {
		f()
		c.fired <- d
	})
}

// timersMsg is the protocol of timersActor.
type timersMsg struct {
	op    string        // "single", "periodic", "cancel", "active", "tick" (a timer's message), "block", "boom", "stopSelf", "mark"
	key   string        // the timer key
	tag   string        // reported by tick and mark; for single and periodic: the tag of the tick
	d     time.Duration // for single and periodic
	gate  chan struct{} // for block, and for a tick: wait until it is closed
	reply chan bool     // for active: IsActive(key)
	then  []timersMsg   // for block: done, in order, once the gate is open
}

// timersActor starts and cancels timers on command and reports, tagged with
// its incarnation, its signals and the ticks and marks it handles.
type timersActor struct {
	gen    int
	events chan<- string
}

func (a *timersActor) Receive(ctx *trt.Context[timersMsg], m timersMsg) {
	switch m.op {
	case "single":
		ctx.Timers().StartSingle(m.key, timersMsg{op: "tick", tag: m.tag, gate: m.gate}, m.d)
	case "periodic":
		ctx.Timers().StartPeriodic(m.key, timersMsg{op: "tick", tag: m.tag, gate: m.gate}, m.d)
	case "cancel":
		ctx.Timers().Cancel(m.key)
	case "active":
		m.reply <- ctx.Timers().IsActive(m.key)
	case "tick":
		a.events <- fmt.Sprintf("tick#%d:%s", a.gen, m.tag)
		if m.gate != nil {
			<-m.gate
		}
	case "block":
		a.events <- "blocked"
		<-m.gate
		for _, next := range m.then {
			a.Receive(ctx, next)
		}
	case "boom":
		panic("boom")
	case "stopSelf":
		_ = ctx.Stop(ctx.Self())
	case "mark":
		a.events <- "mark:" + m.tag
	}
}

func (a *timersActor) OnSignal(_ *trt.Context[timersMsg], sig trt.Signal) {
	switch sig.(type) {
	case trt.Started:
		a.events <- fmt.Sprintf("started#%d", a.gen)
	case trt.Restarting:
		a.events <- fmt.Sprintf("restarting#%d", a.gen)
	case trt.Stopped:
		a.events <- fmt.Sprintf("stopped#%d", a.gen)
	}
}

// timersFixture is a timersActor on a system with a fake clock.
type timersFixture struct {
	sys    *trt.System
	clock  *timersClock
	ref    trt.Ref[timersMsg]
	events chan string
}

func newTimersFixture(t *testing.T, sup trt.Supervision) *timersFixture {
	t.Helper()
	f := &timersFixture{clock: newTimersClock(), events: make(chan string, 256)}
	f.sys = newSystem(t, trt.WithClock(f.clock))
	var gens int
	var mu sync.Mutex
	ref, err := trt.Spawn(f.sys, "timers", func() trt.Behavior[timersMsg] {
		mu.Lock()
		defer mu.Unlock()
		gens++
		return &timersActor{gen: gens, events: f.events}
	}, trt.WithSupervision(sup))
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	f.ref = ref
	f.expect(t, "started#1")
	return f
}

// expect fails unless the next events are want.
func (f *timersFixture) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if got := recv(t, f.events); got != w {
			t.Fatalf("event = %q, want %q", got, w)
		}
	}
}

// mark sends a marker and fails unless it is the next thing the actor
// reports: nothing the actor had queued before it (a fired timer's message
// included, as system mail overtakes user mail) was delivered.
func (f *timersFixture) mark(t *testing.T, tag string) {
	t.Helper()
	f.ref.Tell(timersMsg{op: "mark", tag: tag})
	f.expect(t, "mark:"+tag)
}

// active asks the actor whether the timer key is active.
func (f *timersFixture) active(t *testing.T, key string) bool {
	t.Helper()
	reply := make(chan bool, 1)
	f.ref.Tell(timersMsg{op: "active", key: key, reply: reply})
	return recv(t, reply)
}

// block makes the actor wait in Receive until the returned gate is
// closed, then do then; it returns once the actor is waiting.
func (f *timersFixture) block(t *testing.T, then ...timersMsg) chan struct{} {
	t.Helper()
	gate := make(chan struct{})
	f.ref.Tell(timersMsg{op: "block", gate: gate, then: then})
	f.expect(t, "blocked")
	return gate
}

// fire advances the clock by d and waits until the timer callback that this
// makes run has queued its message.
func (f *timersFixture) fire(t *testing.T, d time.Duration) {
	t.Helper()
	f.clock.Advance(d)
	recv(t, f.clock.fired)
}

// TestTimersSingle pins that a single timer delivers its message once,
// exactly d after it was started on the system clock, and is then inactive.
func TestTimersSingle(t *testing.T) {
	const d = time.Second
	f := newTimersFixture(t, trt.DefaultSupervision)
	f.ref.Tell(timersMsg{op: "single", key: "k", tag: "once", d: d})
	if !f.active(t, "k") {
		t.Fatal("IsActive = false after StartSingle")
	}
	f.clock.Advance(d - time.Nanosecond)
	if !timersPending(f.clock, 1) {
		t.Fatal("the timer expired before d")
	}
	f.mark(t, "early")

	f.clock.Advance(time.Nanosecond)
	f.expect(t, "tick#1:once")
	if timersPending(f.clock, 1) {
		t.Fatal("a single timer is pending again after it fired")
	}
	if f.active(t, "k") {
		t.Fatal("IsActive = true after the single timer was delivered")
	}
	f.clock.Advance(10 * d)
	f.mark(t, "later")
}

// TestTimersPeriodic pins that a periodic timer delivers its message every
// interval, re-armed only once the previous tick was handled (fixed delay):
// while a tick is being handled no timer is pending, so ticks never pile up.
func TestTimersPeriodic(t *testing.T) {
	const interval = time.Second
	f := newTimersFixture(t, trt.DefaultSupervision)
	gate := make(chan struct{})
	f.ref.Tell(timersMsg{op: "periodic", key: "p", tag: "tick", d: interval, gate: gate})
	timersAwait(t, f.clock, 1)

	f.clock.Advance(interval)
	f.expect(t, "tick#1:tick") // now blocked handling the first tick
	for range 5 {
		f.clock.Advance(interval)
		if timersPending(f.clock, 1) {
			t.Fatal("the periodic timer was re-armed while its tick was being handled")
		}
	}
	close(gate) // later ticks do not block

	for i := range 3 {
		timersAwait(t, f.clock, 1)
		f.clock.Advance(interval - time.Nanosecond)
		if !timersPending(f.clock, 1) {
			t.Fatalf("tick %d: the timer expired before the interval", i+2)
		}
		f.clock.Advance(time.Nanosecond)
		f.expect(t, "tick#1:tick")
	}
	if !f.active(t, "p") {
		t.Fatal("IsActive = false for a running periodic timer")
	}
	f.mark(t, "one tick each")
}

// TestTimersCancel pins that a cancelled timer's message is never handled,
// even when the timer had already fired and its message was queued, and
// that a cancelled timer is inactive.
func TestTimersCancel(t *testing.T) {
	tests := []struct {
		name     string // the case
		periodic bool   // the timer is periodic
		queued   bool   // cancel only after the timer fired and its message is queued
	}{
		{name: "single, before it fires"},
		{name: "single, message queued", queued: true},
		{name: "periodic, before it fires", periodic: true},
		{name: "periodic, message queued", periodic: true, queued: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const d = time.Second
			f := newTimersFixture(t, trt.DefaultSupervision)
			op := "single"
			if tc.periodic {
				op = "periodic"
			}
			f.ref.Tell(timersMsg{op: op, key: "k", tag: "cancelled", d: d})
			timersAwait(t, f.clock, 1)
			if tc.queued {
				gate := f.block(t, timersMsg{op: "cancel", key: "k"})
				f.fire(t, d)
				close(gate)
			} else {
				f.ref.Tell(timersMsg{op: "cancel", key: "k"})
			}
			f.mark(t, "cancelled")
			if f.active(t, "k") {
				t.Fatal("IsActive = true after Cancel")
			}
			if timersPending(f.clock, 1) {
				t.Fatal("a timer is pending after Cancel")
			}
			f.clock.Advance(10 * d)
			f.mark(t, "later")
		})
	}
}

// TestTimersReplace pins that starting a timer with a key in use replaces
// the old timer: only the new message arrives, even when the old one had
// already fired and its message was queued.
func TestTimersReplace(t *testing.T) {
	tests := []struct {
		name   string // the case
		queued bool   // replace only after the old timer fired and its message is queued
	}{
		{name: "before the old one fires"},
		{name: "old message queued", queued: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const d = time.Second
			f := newTimersFixture(t, trt.DefaultSupervision)
			f.ref.Tell(timersMsg{op: "periodic", key: "k", tag: "old", d: d})
			timersAwait(t, f.clock, 1)
			replace := timersMsg{op: "single", key: "k", tag: "new", d: 3 * d}
			if tc.queued {
				gate := f.block(t, replace)
				f.fire(t, d)
				close(gate)
			} else {
				f.ref.Tell(replace)
			}
			f.mark(t, "replaced")
			if timersPending(f.clock, 2) {
				t.Fatal("two timers are pending: the replaced one was not stopped")
			}
			if !f.active(t, "k") {
				t.Fatal("IsActive = false after the key was restarted")
			}
			// The old periodic timer would fire at 2d (queued case: 2d after
			// its first firing); the new one fires 3d after the replacement.
			f.clock.Advance(3*d - time.Nanosecond)
			f.mark(t, "old would have fired")
			f.clock.Advance(time.Nanosecond)
			f.expect(t, "tick#1:new")
			if f.active(t, "k") {
				t.Fatal("IsActive = true after the replacing single timer was delivered")
			}
			if timersPending(f.clock, 1) {
				t.Fatal("a timer is still pending: the old one was not stopped")
			}
		})
	}
}

// TestTimersCancelledOnStop pins that an actor's timers are all cancelled
// when it stops: none stays pending on the clock, and a message of a timer
// that had fired is neither delivered nor a dead letter.
func TestTimersCancelledOnStop(t *testing.T) {
	const d = time.Second
	f := newTimersFixture(t, trt.DefaultSupervision)
	f.ref.Tell(timersMsg{op: "single", key: "a", tag: "a", d: d})
	f.ref.Tell(timersMsg{op: "periodic", key: "b", tag: "b", d: 2 * d})
	f.ref.Tell(timersMsg{op: "single", key: "c", tag: "c", d: 5 * d})
	timersAwait(t, f.clock, 3)
	// Timer a fires while the actor is blocked in the message that then stops it.
	gate := f.block(t, timersMsg{op: "stopSelf"})
	f.fire(t, d)
	before := f.sys.DeadLetters()
	close(gate)
	f.expect(t, "stopped#1")
	if timersPending(f.clock, 1) {
		t.Fatal("timers are still pending after the actor stopped")
	}
	f.clock.Advance(10 * d)
	if got := f.sys.DeadLetters(); got != before {
		t.Fatalf("dead letters = %d, want %d: a cancelled timer is not mail", got, before)
	}
}

// TestTimersCancelledOnRestart pins that a restart after a failure cancels
// the failed incarnation's timers: none of their messages reaches either
// incarnation, neither during a restart backoff nor after it, and the new
// incarnation starts with no active timer.
func TestTimersCancelledOnRestart(t *testing.T) {
	const d = 10 * time.Millisecond
	const minB = 100 * time.Millisecond
	tests := []struct {
		name    string // the case
		failure int    // which failure in a row: 1 restarts at once, 2 after minBackoff
	}{
		{name: "restart at once", failure: 1},
		{name: "restart after backoff", failure: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newTimersFixture(t, trt.Restart(minB, time.Second))
			gen := 1
			for k := 1; k < tc.failure; k++ {
				f.ref.Tell(timersMsg{op: "boom"})
				f.expect(t, fmt.Sprintf("restarting#%d", gen), fmt.Sprintf("started#%d", gen+1))
				gen++
			}
			f.ref.Tell(timersMsg{op: "single", key: "s", tag: "s", d: d})
			f.ref.Tell(timersMsg{op: "periodic", key: "p", tag: "p", d: d})
			timersAwait(t, f.clock, 2)
			f.ref.Tell(timersMsg{op: "boom"})
			f.expect(t, fmt.Sprintf("restarting#%d", gen))
			if tc.failure > 1 {
				// Only the restart timer stays pending: the two user timers,
				// left alone, would stay pending until the clock moves.
				eventually(t, "the failed incarnation's timers are cancelled during the backoff", func() bool {
					return !timersPending(f.clock, 2)
				})
				timersAwait(t, f.clock, 1)
				f.clock.Advance(minB)
			}
			f.expect(t, fmt.Sprintf("started#%d", gen+1))
			if timersPending(f.clock, 1) {
				t.Fatal("timers are pending after the restart")
			}
			if f.active(t, "s") || f.active(t, "p") {
				t.Fatal("the new incarnation has active timers of the failed one")
			}
			f.clock.Advance(10 * d)
			f.mark(t, "after restart")
		})
	}
}
