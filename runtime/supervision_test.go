package runtime_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	trt "github.com/trellis-go/trellis/runtime"
)

// supMsg is the protocol of supCounter.
type supMsg struct {
	op    string     // "inc", "get", "note", "boom", "watch", "watchWith"
	tag   string     // for "note": reported as handled; for "watchWith": the tag of the note it delivers
	reply chan<- int // for "get": receives the counter
	ref   trt.AnyRef // for "watch" and "watchWith": the actor to watch
}

// supCounter is a supervised actor with state: it counts "inc", panics on
// "boom", and reports its signals and notes tagged with its incarnation
// (1 for the behavior the factory made first).
type supCounter struct {
	n      int
	gen    int
	events chan<- string
	booms  *atomic.Int32
}

func (c *supCounter) Receive(ctx *trt.Context[supMsg], m supMsg) {
	switch m.op {
	case "inc":
		c.n++
	case "get":
		m.reply <- c.n
	case "note":
		c.events <- fmt.Sprintf("note#%d:%s", c.gen, m.tag)
	case "boom":
		c.booms.Add(1)
		panic("boom")
	case "watch":
		ctx.Watch(m.ref)
	case "watchWith":
		ctx.WatchWith(m.ref, supMsg{op: "note", tag: m.tag})
	}
}

func (c *supCounter) OnSignal(_ *trt.Context[supMsg], sig trt.Signal) {
	switch s := sig.(type) {
	case trt.Started:
		c.events <- fmt.Sprintf("started#%d", c.gen)
	case trt.Restarting:
		c.events <- fmt.Sprintf("restarting#%d:%v", c.gen, s.Cause)
	case trt.Stopped:
		c.events <- fmt.Sprintf("stopped#%d", c.gen)
	case trt.Terminated:
		c.events <- fmt.Sprintf("terminated#%d:%s", c.gen, s.Ref.Path())
	}
}

// supSpawn starts a supCounter under sup, returning its ref, its event
// stream and the count of "boom" messages it handled.
func supSpawn(t *testing.T, sys *trt.System, name string, sup trt.Supervision) (trt.Ref[supMsg], chan string, *atomic.Int32) {
	t.Helper()
	events := make(chan string, 256)
	booms := new(atomic.Int32)
	var gens atomic.Int32
	ref, err := trt.Spawn(sys, name, func() trt.Behavior[supMsg] {
		return &supCounter{gen: int(gens.Add(1)), events: events, booms: booms}
	}, trt.WithSupervision(sup))
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	return ref, events, booms
}

// supGet asks the counter for its value, failing if it does not answer.
func supGet(t *testing.T, ref trt.Ref[supMsg]) int {
	t.Helper()
	reply := make(chan int, 1)
	ref.Tell(supMsg{op: "get", reply: reply})
	return recv(t, reply)
}

// supExpect reads the next events and compares them with want, in order.
func supExpect(t *testing.T, events <-chan string, want ...string) {
	t.Helper()
	for i, w := range want {
		if got := recv(t, events); got != w {
			t.Fatalf("event %d = %q, want %q (all wanted: %q)", i, got, w, want)
		}
	}
}

// supExpectNoEvent fails if an event is reported within d; call it only
// after a positive event proves any such event would already be there.
func supExpectNoEvent(t *testing.T, events <-chan string, d time.Duration) {
	t.Helper()
	select {
	case e := <-events:
		t.Fatalf("unexpected event %q", e)
	case <-time.After(d):
	}
}

// TestSupervisionStrategies pins what each strategy does to the state and
// lifecycle of an actor whose Receive panics, and that the panicking message
// is not handled again.
func TestSupervisionStrategies(t *testing.T) {
	tests := []struct {
		name      string          // the strategy
		super     trt.Supervision // the actor's supervision
		wantAfter []string        // the events that follow the failure
		wantCount int             // the counter seen after the failure (0: fresh state); -1: the actor stopped
	}{
		{
			name:      "default restarts with fresh state",
			super:     trt.DefaultSupervision,
			wantAfter: []string{"restarting#1:boom", "started#2"},
			wantCount: 0,
		},
		{
			name:      "restart with backoff restarts the first failure at once",
			super:     trt.Restart(time.Second, time.Minute),
			wantAfter: []string{"restarting#1:boom", "started#2"},
			wantCount: 0,
		},
		{
			name:      "resume keeps the state",
			super:     trt.Resume(),
			wantAfter: nil,
			wantCount: 2,
		},
		{
			name:      "stop on failure stops the actor",
			super:     trt.StopOnFailure(),
			wantAfter: []string{"stopped#1"},
			wantCount: -1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The fake clock is never advanced: a restart that waited for it would hang.
			sys := newSystem(t, trt.WithClock(clockwork.NewFakeClock()))
			ref, events, booms := supSpawn(t, sys, "counter", tc.super)
			spy := newWatchSpy(t, sys, "spy")
			spy.watch(t, ref)
			supExpect(t, events, "started#1")

			ref.Tell(supMsg{op: "inc"})
			ref.Tell(supMsg{op: "inc"})
			if got := supGet(t, ref); got != 2 {
				t.Fatalf("counter before the failure = %d, want 2", got)
			}
			ref.Tell(supMsg{op: "boom"})

			if tc.wantCount < 0 {
				supExpect(t, events, tc.wantAfter...)
				spy.expect(t, "terminated:"+ref.Path())
				before := sys.DeadLetters()
				ref.Tell(supMsg{op: "inc"})
				if got := sys.DeadLetters(); got != before+1 {
					t.Fatalf("dead letters after telling the stopped actor = %d, want %d", got, before+1)
				}
				if got := booms.Load(); got != 1 {
					t.Fatalf("boom handled %d times, want 1", got)
				}
				return
			}

			if got := supGet(t, ref); got != tc.wantCount {
				t.Fatalf("counter after the failure = %d, want %d", got, tc.wantCount)
			}
			// The get was handled after everything the failure caused, so
			// every event is already in the channel.
			supExpect(t, events, tc.wantAfter...)
			select {
			case e := <-events:
				t.Fatalf("unexpected event %q after %q", e, tc.wantAfter)
			default:
			}
			if got := booms.Load(); got != 1 {
				t.Fatalf("boom handled %d times, want 1", got)
			}
			// The actor still works.
			ref.Tell(supMsg{op: "inc"})
			if got := supGet(t, ref); got != tc.wantCount+1 {
				t.Fatalf("counter after one more inc = %d, want %d", got, tc.wantCount+1)
			}
			spy.mark(t, "alive")
		})
	}
}

// TestSupervisionRestartBackoff pins the restart backoff on the system
// clock: the first failure restarts at once, a second in a row waits exactly
// minBackoff with the mail sent meanwhile kept (not handled) and then handled
// in order by the new incarnation, a third waits twice as long, a failure
// 2*maxBackoff after the previous one is still in a row, and one later than
// that counts as a first one again.
func TestSupervisionRestartBackoff(t *testing.T) {
	const minB, maxB = 100 * time.Millisecond, time.Second
	fc := clockwork.NewFakeClock()
	// One worker: mailboxes run in the order they were scheduled, so a
	// marker handled by another actor proves the suspended actor was not run.
	sys := newSystem(t, trt.WithClock(fc), trt.WithWorkers(1))
	ref, events, booms := supSpawn(t, sys, "counter", trt.Restart(minB, maxB))
	marker := newProbe[string](t, sys, "marker")
	supExpect(t, events, "started#1")

	// First failure: restarted at once, no timer.
	ref.Tell(supMsg{op: "boom"})
	supExpect(t, events, "restarting#1:boom", "started#2")
	if timersPending(fc, 1) {
		t.Fatal("a timer is pending after a first failure; the restart should not wait")
	}

	// Second failure in a row: the restart waits for minBackoff.
	ref.Tell(supMsg{op: "boom"})
	supExpect(t, events, "restarting#2:boom")
	timersAwait(t, fc, 1)
	for _, tag := range []string{"a", "b", "c"} {
		ref.Tell(supMsg{op: "note", tag: tag})
	}
	marker.Ref.Tell("m")
	if got := marker.Expect(t); got != "m" {
		t.Fatalf("marker got %q", got)
	}
	supExpectNoEvent(t, events, 20*time.Millisecond)

	fc.Advance(minB - time.Nanosecond)
	if !timersPending(fc, 1) {
		t.Fatal("the restart timer expired before minBackoff")
	}
	fc.Advance(time.Nanosecond)
	supExpect(t, events, "started#3", "note#3:a", "note#3:b", "note#3:c")

	// Third failure in a row: twice minBackoff.
	ref.Tell(supMsg{op: "boom"})
	supExpect(t, events, "restarting#3:boom")
	timersAwait(t, fc, 1)
	fc.Advance(2*minB - time.Nanosecond)
	if !timersPending(fc, 1) {
		t.Fatal("the restart timer expired before 2*minBackoff")
	}
	fc.Advance(time.Nanosecond)
	supExpect(t, events, "started#4")
	if got := supGet(t, ref); got != 0 {
		t.Fatalf("counter after restart = %d, want 0", got)
	}

	// Exactly 2*maxBackoff after the previous failure (which came at minB
	// on the clock, now at 3*minB), a failure is still in a row: 4*minBackoff.
	fc.Advance(2*maxB - 2*minB)
	ref.Tell(supMsg{op: "boom"})
	supExpect(t, events, "restarting#4:boom")
	timersAwait(t, fc, 1)
	fc.Advance(4*minB - time.Nanosecond)
	if !timersPending(fc, 1) {
		t.Fatal("the restart timer expired before 4*minBackoff")
	}
	fc.Advance(time.Nanosecond)
	supExpect(t, events, "started#5")

	// More than 2*maxBackoff later, a failure is a first one: at once.
	fc.Advance(2*maxB + time.Nanosecond)
	ref.Tell(supMsg{op: "boom"})
	supExpect(t, events, "restarting#5:boom", "started#6")
	if timersPending(fc, 1) {
		t.Fatal("a timer is pending after a failure long after the last; the restart should not wait")
	}
	if got := booms.Load(); got != 5 {
		t.Fatalf("boom handled %d times, want 5", got)
	}
}

// TestSupervisionMaxRestarts pins that WithMaxRestarts(n) restarts n
// failures in a row and stops the actor at the (n+1)-th.
func TestSupervisionMaxRestarts(t *testing.T) {
	tests := []struct {
		name string // the case
		n    int    // the restart limit
	}{
		{name: "one restart", n: 1},
		{name: "three restarts", n: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			sys := newSystem(t, trt.WithClock(fc))
			ref, events, _ := supSpawn(t, sys, "counter", trt.DefaultSupervision.WithMaxRestarts(tc.n))
			spy := newWatchSpy(t, sys, "spy")
			spy.watch(t, ref)
			supExpect(t, events, "started#1")
			backoff := 10 * time.Millisecond // DefaultSupervision's minBackoff
			for k := 1; k <= tc.n; k++ {
				ref.Tell(supMsg{op: "boom"})
				supExpect(t, events, fmt.Sprintf("restarting#%d:boom", k))
				if k >= 2 {
					timersAwait(t, fc, 1)
					fc.Advance(backoff)
					backoff *= 2
				}
				supExpect(t, events, fmt.Sprintf("started#%d", k+1))
				ref.Tell(supMsg{op: "inc"})
				if got := supGet(t, ref); got != 1 {
					t.Fatalf("after failure %d: counter = %d, want 1", k, got)
				}
			}
			ref.Tell(supMsg{op: "boom"})
			supExpect(t, events, fmt.Sprintf("stopped#%d", tc.n+1))
			spy.expect(t, "terminated:"+ref.Path())
		})
	}
}

// TestSupervisionStartedPanic pins that a panic in the Started signal is a
// failure like a message's: under Resume the actor goes on handling mail.
func TestSupervisionStartedPanic(t *testing.T) {
	sys := newSystem(t, trt.WithClock(clockwork.NewFakeClock()))
	got := make(chan string, 8)
	ref, err := trt.Spawn(sys, "p", func() trt.Behavior[string] {
		return trt.Funcs[string]{
			Message: func(_ *trt.Context[string], m string) { got <- m },
			Signal: func(_ *trt.Context[string], s trt.Signal) {
				if _, ok := s.(trt.Started); ok {
					panic("no start")
				}
			},
		}
	}, trt.WithSupervision(trt.Resume()))
	if err != nil {
		t.Fatal(err)
	}
	ref.Tell("hello")
	if m := recv(t, got); m != "hello" {
		t.Fatalf("got %q, want hello", m)
	}
}

// TestSupervisionBackoffKeepsWatchEnds pins that the end of a watched actor
// during a restart backoff is kept like mail: neither the Terminated signal
// nor the WatchWith message reaches the failed incarnation, and the new one
// gets it once it has started (watches outlive a restart).
func TestSupervisionBackoffKeepsWatchEnds(t *testing.T) {
	const minB = 100 * time.Millisecond
	tests := []struct {
		name string // the case
		with bool   // watch with WatchWith instead of Watch
		want string // what the new incarnation reports after its Started
	}{
		{name: "Watch", want: "terminated#3:/user/p/target"},
		{name: "WatchWith", with: true, want: "note#3:gone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			// One worker: mailboxes run in the order they were scheduled.
			sys := newSystem(t, trt.WithClock(fc), trt.WithWorkers(1))
			ref, events, _ := supSpawn(t, sys, "counter", trt.Restart(minB, time.Second))
			parent, watched := watchFamily(t, sys, "p")
			spy := newWatchSpy(t, sys, "spy")
			spy.watch(t, parent)
			supExpect(t, events, "started#1")
			if tc.with {
				ref.Tell(supMsg{op: "watchWith", ref: watched, tag: "gone"})
			} else {
				ref.Tell(supMsg{op: "watch", ref: watched})
			}
			ref.Tell(supMsg{op: "boom"})
			supExpect(t, events, "restarting#1:boom", "started#2")
			ref.Tell(supMsg{op: "boom"})
			supExpect(t, events, "restarting#2:boom")
			timersAwait(t, fc, 1)

			// The target tells the counter of its end (scheduling the
			// counter's mailbox) before it tells its parent, whose end the
			// spy hears of: with one worker, the counter has handled the
			// Terminated by the time the spy reports.
			sys.Stop(parent)
			spy.expect(t, "terminated:/user/p")
			supExpectNoEvent(t, events, 20*time.Millisecond)

			fc.Advance(minB)
			supExpect(t, events, "started#3", tc.want)
			ref.Tell(supMsg{op: "note", tag: "end"})
			supExpect(t, events, "note#3:end")
		})
	}
}
