package runtime_test

import (
	"testing"

	trt "github.com/trellis-go/trellis/runtime"
)

// watchCmd is the protocol of watchSpy.
type watchCmd struct {
	op   string        // "watch", "watchWith", "unwatch", "mark", "gone" (the WatchWith message), "block"
	ref  trt.AnyRef    // for watch, watchWith and unwatch: the actor
	tag  string        // for watchWith: the tag of its gone message; for mark and gone: reported
	gate chan struct{} // for block: the actor waits until it is closed
	then []watchCmd    // for block: done, in order, once the gate is open
}

// watchSpy is an actor that watches and unwatches on command and reports,
// as events, the Terminated signals and the messages it gets.
type watchSpy struct {
	Ref    trt.Ref[watchCmd]
	events chan string
}

func newWatchSpy(t *testing.T, sys *trt.System, name string) *watchSpy {
	t.Helper()
	s := &watchSpy{events: make(chan string, 256)}
	var do func(ctx *trt.Context[watchCmd], m watchCmd)
	do = func(ctx *trt.Context[watchCmd], m watchCmd) {
		switch m.op {
		case "watch":
			ctx.Watch(m.ref)
		case "watchWith":
			ctx.WatchWith(m.ref, watchCmd{op: "gone", tag: m.tag})
		case "unwatch":
			ctx.Unwatch(m.ref)
		case "mark":
			s.events <- "mark:" + m.tag
		case "gone":
			s.events <- "gone:" + m.tag
		case "block":
			s.events <- "blocked"
			<-m.gate
			for _, next := range m.then {
				do(ctx, next)
			}
		}
	}
	ref, err := trt.Spawn(sys, name, func() trt.Behavior[watchCmd] {
		return trt.Funcs[watchCmd]{
			Message: do,
			Signal: func(_ *trt.Context[watchCmd], sig trt.Signal) {
				if term, ok := sig.(trt.Terminated); ok {
					s.events <- "terminated:" + term.Ref.Path()
				}
			},
		}
	})
	if err != nil {
		t.Fatalf("spawn watch spy: %v", err)
	}
	s.Ref = ref
	return s
}

// expect fails unless the next event is want.
func (s *watchSpy) expect(t *testing.T, want string) {
	t.Helper()
	if got := recv(t, s.events); got != want {
		t.Fatalf("spy event = %q, want %q", got, want)
	}
}

// mark sends a marker and waits for it: every event caused by something the
// spy handled before it is then already reported, and none is pending.
func (s *watchSpy) mark(t *testing.T, tag string) {
	t.Helper()
	s.Ref.Tell(watchCmd{op: "mark", tag: tag})
	s.expect(t, "mark:"+tag)
}

// watch makes the spy watch ref and waits until it has.
func (s *watchSpy) watch(t *testing.T, ref trt.AnyRef) {
	t.Helper()
	s.Ref.Tell(watchCmd{op: "watch", ref: ref})
	s.mark(t, "watching")
}

// watchFamily spawns a top-level actor named name with one child, named
// "target", and returns both refs. Stopping the parent stops the target
// first, and the target tells its watchers before it tells its parent, so
// the parent's Terminated proves that the target's are all queued.
func watchFamily(t *testing.T, sys *trt.System, name string) (parent trt.Ref[int], target trt.AnyRef) {
	t.Helper()
	children := make(chan trt.AnyRef, 1)
	parent, err := trt.Spawn(sys, name, func() trt.Behavior[int] {
		return trt.Funcs[int]{
			Message: func(*trt.Context[int], int) {},
			Signal: func(ctx *trt.Context[int], sig trt.Signal) {
				if _, ok := sig.(trt.Started); !ok {
					return
				}
				child, err := trt.Spawn(ctx, "target", func() trt.Behavior[int] {
					return trt.ReceiveFunc(func(*trt.Context[int], int) {})
				})
				if err != nil {
					t.Errorf("spawn target: %v", err)
				}
				children <- child
			},
		}
	})
	if err != nil {
		t.Fatalf("spawn %s: %v", name, err)
	}
	return parent, recv(t, children)
}

// TestWatchTerminated pins that a watcher gets Terminated for the watched
// actor when it stops, or the WatchWith message instead of the signal.
func TestWatchTerminated(t *testing.T) {
	tests := []struct {
		name string   // the case
		cmd  watchCmd // how the spy watches (ref is filled in)
		want string   // the spy's event when the watched actor stops
	}{
		{name: "Watch: Terminated signal", cmd: watchCmd{op: "watch"}, want: "terminated:/user/target"},
		{name: "WatchWith: the given message", cmd: watchCmd{op: "watchWith", tag: "t1"}, want: "gone:t1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			target := newProbe[int](t, sys, "target")
			spy := newWatchSpy(t, sys, "spy")
			cmd := tc.cmd
			cmd.ref = target.Ref
			spy.Ref.Tell(cmd)
			spy.mark(t, "watching")
			sys.Stop(target.Ref)
			spy.expect(t, tc.want)
			// Any second notification of the same end would have been
			// queued with the first, ahead of the marker.
			spy.mark(t, "after")
		})
	}
}

// TestWatchAlreadyStopped pins that watching an actor that has already
// terminated yields Terminated at once.
func TestWatchAlreadyStopped(t *testing.T) {
	sys := newSystem(t)
	target := newProbe[int](t, sys, "target")
	first := newWatchSpy(t, sys, "first")
	first.watch(t, target.Ref)
	sys.Stop(target.Ref)
	first.expect(t, "terminated:/user/target")

	late := newWatchSpy(t, sys, "late")
	late.Ref.Tell(watchCmd{op: "watch", ref: target.Ref})
	late.expect(t, "terminated:/user/target")
	lateWith := newWatchSpy(t, sys, "lateWith")
	lateWith.Ref.Tell(watchCmd{op: "watchWith", ref: target.Ref, tag: "x"})
	lateWith.expect(t, "gone:x")
}

// TestWatchUnwatch pins that no Terminated arrives after Unwatch: neither
// when the unwatch reaches the actor before it stops, nor when its
// Terminated is already queued at the watcher.
func TestWatchUnwatch(t *testing.T) {
	tests := []struct {
		name string // the case
		with bool   // watch with WatchWith instead of Watch
		late bool   // unwatch only once the target has terminated and its Terminated is queued at the spy
	}{
		{name: "unwatch before stop"},
		{name: "unwatch before stop, WatchWith", with: true},
		{name: "unwatch with Terminated queued", late: true},
		{name: "unwatch with WatchWith message queued", with: true, late: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			parent, target := watchFamily(t, sys, "p")
			spy := newWatchSpy(t, sys, "spy")
			if tc.with {
				spy.Ref.Tell(watchCmd{op: "watchWith", ref: target, tag: "t"})
			} else {
				spy.Ref.Tell(watchCmd{op: "watch", ref: target})
			}
			spy.mark(t, "watching")

			if !tc.late {
				spy.Ref.Tell(watchCmd{op: "unwatch", ref: target})
				spy.watch(t, parent)
				sys.Stop(parent)
				// The target's end, had it been reported, would come first.
				spy.expect(t, "terminated:/user/p")
				return
			}

			other := newWatchSpy(t, sys, "other")
			other.watch(t, parent)
			gate := make(chan struct{})
			spy.Ref.Tell(watchCmd{op: "block", gate: gate, then: []watchCmd{
				{op: "unwatch", ref: target},
				{op: "mark", tag: "unwatched"},
			}})
			spy.expect(t, "blocked")
			sys.Stop(parent)
			other.expect(t, "terminated:/user/p") // the target's Terminated is queued at the blocked spy
			close(gate)
			spy.expect(t, "mark:unwatched")
			spy.mark(t, "after")
		})
	}
}

// TestWatchAdapter pins that watching a message adapter watches the actor
// behind it: Terminated comes, naming the actor, when that actor stops.
func TestWatchAdapter(t *testing.T) {
	sys := newSystem(t)
	adapters := make(chan trt.Ref[string], 1)
	target, err := trt.Spawn(sys, "target", func() trt.Behavior[int] {
		return trt.Funcs[int]{
			Message: func(*trt.Context[int], int) {},
			Signal: func(ctx *trt.Context[int], sig trt.Signal) {
				if _, ok := sig.(trt.Started); ok {
					adapters <- trt.MessageAdapter(ctx, func(s string) int { return len(s) })
				}
			},
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	adapter := recv(t, adapters)
	spy := newWatchSpy(t, sys, "spy")
	spy.watch(t, adapter)
	sys.Stop(target)
	spy.expect(t, "terminated:"+target.Path())
}

// TestWatchWatcherStopsFirst pins that a watcher that stops before the
// actor it watches does not keep that actor from terminating, and gets
// nothing when it does.
func TestWatchWatcherStopsFirst(t *testing.T) {
	sys := newSystem(t)
	target := newProbe[int](t, sys, "target")
	watcher := newWatchSpy(t, sys, "watcher")
	watcher.watch(t, target.Ref)
	other := newWatchSpy(t, sys, "other")
	other.watch(t, target.Ref)
	other.watch(t, watcher.Ref)

	sys.Stop(watcher.Ref)
	other.expect(t, "terminated:/user/watcher")
	sys.Stop(target.Ref)
	other.expect(t, "terminated:/user/target")
}
