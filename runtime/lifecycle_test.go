package runtime_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	trt "github.com/trellis-go/trellis/runtime"
)

// lifecycleDo is a message that runs inside the actor that handles it, so a
// test can call Context methods on the actor's own goroutine.
type lifecycleDo func(ctx *trt.Context[lifecycleDo])

// lifecycleActor is the behavior factory of an actor that runs lifecycleDo
// messages; onSignal, when not nil, handles its signals.
func lifecycleActor(onSignal func(ctx *trt.Context[lifecycleDo], sig trt.Signal)) func() trt.Behavior[lifecycleDo] {
	return func() trt.Behavior[lifecycleDo] {
		return trt.Funcs[lifecycleDo]{
			Message: func(ctx *trt.Context[lifecycleDo], f lifecycleDo) { f(ctx) },
			Signal:  onSignal,
		}
	}
}

// lifecycleBlock makes ref's actor block in Receive, holding its worker,
// until the returned release is called (at the latest when the test ends).
func lifecycleBlock(t *testing.T, ref trt.Ref[lifecycleDo]) (release func()) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	ref.Tell(func(*trt.Context[lifecycleDo]) { close(entered); <-gate })
	recv(t, entered)
	return release
}

// lifecycleRun runs f on ref's actor and waits until it has returned.
func lifecycleRun(t *testing.T, ref trt.Ref[lifecycleDo], f func(ctx *trt.Context[lifecycleDo])) {
	t.Helper()
	done := make(chan struct{})
	ref.Tell(func(ctx *trt.Context[lifecycleDo]) {
		defer close(done)
		f(ctx)
	})
	recv(t, done)
}

// lifecycleWatch returns a channel that is closed when ref's actor has
// terminated, as a watching actor learns it from the Terminated signal. It
// returns once the watch has been sent, so the watch reaches ref's actor
// before anything the caller sends it next.
func lifecycleWatch(t *testing.T, sys *trt.System, ref trt.AnyRef) <-chan struct{} {
	t.Helper()
	done, watching := lifecycleWatchLater(t, sys, ref)
	recv(t, watching)
	return done
}

// lifecycleWatchLater is lifecycleWatch without waiting: the watch is sent
// when the watching actor first runs, which closes watching.
func lifecycleWatchLater(t *testing.T, sys *trt.System, ref trt.AnyRef) (done, watching <-chan struct{}) {
	t.Helper()
	doneCh, watchingCh := make(chan struct{}), make(chan struct{})
	var once sync.Once
	_, err := trt.Spawn(sys, "", func() trt.Behavior[struct{}] {
		return trt.Funcs[struct{}]{
			Message: func(*trt.Context[struct{}], struct{}) {},
			Signal: func(ctx *trt.Context[struct{}], sig trt.Signal) {
				switch sig.(type) {
				case trt.Started:
					ctx.Watch(ref)
					close(watchingCh)
				case trt.Terminated:
					once.Do(func() { close(doneCh) })
				}
			},
		}
	})
	if err != nil {
		t.Fatalf("spawn watcher of %s: %v", ref.Path(), err)
	}
	return doneCh, watchingCh
}

// lifecycleLog records the paths of actors as they handle Stopped, in order,
// from any number of actors.
type lifecycleLog struct {
	mu      sync.Mutex
	stopped []string
}

func (l *lifecycleLog) onSignal(ctx *trt.Context[lifecycleDo], sig trt.Signal) {
	if _, ok := sig.(trt.Stopped); ok {
		l.mu.Lock()
		l.stopped = append(l.stopped, ctx.Self().Path())
		l.mu.Unlock()
	}
}

func (l *lifecycleLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.stopped)
}

// checkChildrenStopFirst fails unless every actor in stopped handled Stopped
// after all of its descendants in stopped did.
func checkChildrenStopFirst(t *testing.T, stopped []string) {
	t.Helper()
	at := make(map[string]int, len(stopped))
	for i, p := range stopped {
		at[p] = i
	}
	for _, p := range stopped {
		for _, q := range stopped {
			if strings.HasPrefix(q, p+"/") && at[q] > at[p] {
				t.Errorf("%s handled Stopped before its descendant %s", p, q)
			}
		}
	}
}

// Spawn refuses taken and malformed names, a nil factory and a stopped
// system, each with an error that says so.
func TestLifecycleSpawnErrors(t *testing.T) {
	noop := lifecycleActor(nil)
	tests := []struct {
		name     string                           // the case
		setup    func(*testing.T, *trt.System)    // run before the spawn
		spawn    string                           // the name to spawn
		factory  func() trt.Behavior[lifecycleDo] // the behavior factory given to Spawn
		wantErr  error                            // a sentinel the error must wrap; nil: any error
		mentions string                           // text the error message must contain
	}{
		{
			name: "taken name",
			setup: func(t *testing.T, sys *trt.System) {
				if _, err := trt.Spawn(sys, "dup", noop); err != nil {
					t.Fatal(err)
				}
			},
			spawn: "dup", factory: noop, wantErr: trt.ErrNameTaken, mentions: "dup",
		},
		{name: "slash", spawn: "a/b", factory: noop, mentions: "a/b"},
		{name: "dollar prefix", spawn: "$x", factory: noop, mentions: "$x"},
		{name: "nil factory", spawn: "nf", factory: nil, mentions: "nil"},
		{
			name: "after shutdown",
			setup: func(t *testing.T, sys *trt.System) {
				if err := sys.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
			},
			spawn: "late", factory: noop, wantErr: trt.ErrSystemStopped,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			if tc.setup != nil {
				tc.setup(t, sys)
			}
			ref, err := trt.Spawn(sys, tc.spawn, tc.factory)
			if err == nil {
				t.Fatalf("spawn %q succeeded: %s", tc.spawn, ref.Path())
			}
			if ref != nil {
				t.Errorf("a failed spawn returned a ref: %v", ref)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v does not wrap %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("error %q does not mention %q", err, tc.mentions)
			}
		})
	}
}

// An empty name gets a generated one, different for every actor.
func TestLifecycleSpawnGeneratesNames(t *testing.T) {
	sys := newSystem(t)
	seen := map[string]bool{}
	for range 100 {
		ref, err := trt.Spawn(sys, "", lifecycleActor(nil))
		if err != nil {
			t.Fatal(err)
		}
		p := ref.Path()
		if !strings.HasPrefix(p, "/user/$") || seen[p] {
			t.Fatalf("generated path %q: want a new /user/$… path", p)
		}
		seen[p] = true
	}
}

// A name stays taken while its holder is stopping and is free as soon as a
// watcher has seen the holder terminate, even if the parent has not yet
// heard of it, at the top level and under an actor.
func TestLifecycleNameFreeAfterStop(t *testing.T) {
	// Workers for: the holder held in its stop, the watcher, the parent.
	sys := newSystem(t, trt.WithWorkers(4))
	parent, err := trt.Spawn(sys, "parent", lifecycleActor(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string                                          // where the name lives
		spawn func(name string) (trt.Ref[lifecycleDo], error) // spawns there
		stop  func(ref trt.Ref[lifecycleDo])                  // stops an actor spawned there
	}{
		{
			name:  "top level",
			spawn: func(name string) (trt.Ref[lifecycleDo], error) { return trt.Spawn(sys, name, lifecycleActor(nil)) },
			stop:  func(ref trt.Ref[lifecycleDo]) { sys.Stop(ref) },
		},
		{
			name: "child",
			spawn: func(name string) (ref trt.Ref[lifecycleDo], err error) {
				lifecycleRun(t, parent, func(ctx *trt.Context[lifecycleDo]) {
					ref, err = trt.Spawn(ctx, name, lifecycleActor(nil))
				})
				return ref, err
			},
			stop: func(ref trt.Ref[lifecycleDo]) {
				var err error
				lifecycleRun(t, parent, func(ctx *trt.Context[lifecycleDo]) { err = ctx.Stop(ref) })
				if err != nil {
					t.Fatalf("stop child: %v", err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := trt.NewServiceKey[lifecycleDo]("holder " + tc.name)
			// A receptionist subscriber whose adapter blocks on the listing
			// without the holder: that listing is published by the holder's
			// own termination after its watchers were told and before its
			// parent is, which keeps that window open while the test spawns.
			hold, inWindow := make(chan struct{}), make(chan struct{})
			var holdOnce sync.Once
			unhold := func() { holdOnce.Do(func() { close(hold) }) }
			t.Cleanup(unhold)
			var listed atomic.Bool
			sub, err := trt.Spawn(sys, "", lifecycleActor(nil))
			if err != nil {
				t.Fatal(err)
			}
			lifecycleRun(t, sub, func(ctx *trt.Context[lifecycleDo]) {
				trt.Subscribe(sys, key, trt.MessageAdapter(ctx, func(l trt.Listing[lifecycleDo]) lifecycleDo {
					if len(l.Refs) > 0 {
						listed.Store(true)
					} else if listed.Load() {
						close(inWindow)
						<-hold
					}
					return func(*trt.Context[lifecycleDo]) {}
				}))
			})

			ref, err := tc.spawn("reused")
			if err != nil {
				t.Fatal(err)
			}
			trt.Register(sys, key, ref)
			// Hold the actor in a Receive so that it cannot terminate yet.
			entered, gate := make(chan struct{}), make(chan struct{})
			ref.Tell(func(*trt.Context[lifecycleDo]) { close(entered); <-gate })
			recv(t, entered)
			terminated := lifecycleWatch(t, sys, ref)
			tc.stop(ref)
			if _, err := tc.spawn("reused"); !errors.Is(err, trt.ErrNameTaken) {
				close(gate)
				t.Fatalf("spawn while the holder is stopping: got %v, want ErrNameTaken", err)
			}
			close(gate)
			recv(t, terminated)
			recv(t, inWindow)
			again, err := tc.spawn("reused")
			unhold()
			if err != nil {
				t.Fatalf("spawn after the holder terminated: %v", err)
			}
			if again.Path() != ref.Path() {
				t.Errorf("new holder's path %q, want %q", again.Path(), ref.Path())
			}
			// The old holder's late departure must not evict the new one.
			lifecycleRun(t, again, func(*trt.Context[lifecycleDo]) {})
			if _, err := tc.spawn("reused"); !errors.Is(err, trt.ErrNameTaken) {
				t.Errorf("spawn while the new holder lives: got %v, want ErrNameTaken", err)
			}
		})
	}
}

// A watch queued right behind a stop, so that the actor handles both in one
// batch of system messages, is still answered with Terminated.
func TestLifecycleWatchQueuedBehindStop(t *testing.T) {
	sys := newSystem(t, trt.WithWorkers(1))
	target, err := trt.Spawn(sys, "target", lifecycleActor(nil))
	if err != nil {
		t.Fatal(err)
	}
	lifecycleRun(t, target, func(*trt.Context[lifecycleDo]) {}) // Started handled: the target is idle
	release := mailboxBlockWorker(t, sys)
	// The run queue is now: the watcher (its Started), then the target (its
	// stop); the watcher's Watch joins the stop in the target's queue.
	terminated, _ := lifecycleWatchLater(t, sys, target)
	sys.Stop(target)
	release()
	recv(t, terminated)
}

// A child lives under its parent's path, is listed by Children and Child
// until it stops, and only the actor itself and its children can be
// stopped from its Context.
func TestLifecycleChildren(t *testing.T) {
	sys := newSystem(t)
	other, err := trt.Spawn(sys, "other", lifecycleActor(nil))
	if err != nil {
		t.Fatal(err)
	}
	parent, err := trt.Spawn(sys, "parent", lifecycleActor(nil))
	if err != nil {
		t.Fatal(err)
	}
	var kids [3]trt.Ref[lifecycleDo]
	var dupErr error
	lifecycleRun(t, parent, func(ctx *trt.Context[lifecycleDo]) {
		for i := range kids {
			kids[i], err = trt.Spawn(ctx, fmt.Sprintf("c%d", i+1), lifecycleActor(nil))
			if err != nil {
				return
			}
		}
		_, dupErr = trt.Spawn(ctx, "c2", lifecycleActor(nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(dupErr, trt.ErrNameTaken) {
		t.Errorf("spawning a second child c2: got %v, want ErrNameTaken", dupErr)
	}
	var grandchild trt.Ref[lifecycleDo]
	lifecycleRun(t, kids[0], func(ctx *trt.Context[lifecycleDo]) {
		grandchild, err = trt.Spawn(ctx, "g", lifecycleActor(nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"/user/parent/c1", "/user/parent/c2", "/user/parent/c3"} {
		if got := kids[i].Path(); got != want {
			t.Errorf("child %d: path %q, want %q", i, got, want)
		}
	}
	if got, want := grandchild.Path(), "/user/parent/c1/g"; got != want {
		t.Errorf("grandchild path %q, want %q", got, want)
	}

	paths := func(refs []trt.AnyRef) []string {
		var out []string
		for _, r := range refs {
			out = append(out, r.Path())
		}
		return out
	}
	var children []string
	var c2 trt.AnyRef
	var c2Found, missingFound bool
	lifecycleRun(t, parent, func(ctx *trt.Context[lifecycleDo]) {
		children = paths(ctx.Children())
		c2, c2Found = ctx.Child("c2")
		_, missingFound = ctx.Child("nope")
	})
	if want := []string{"/user/parent/c1", "/user/parent/c2", "/user/parent/c3"}; !slices.Equal(children, want) {
		t.Errorf("Children: %q, want %q", children, want)
	}
	if !c2Found || c2 != trt.AnyRef(kids[1]) {
		t.Errorf("Child(c2) = %v, %v; want the ref Spawn returned", c2, c2Found)
	}
	if missingFound {
		t.Error("Child(nope) found a child")
	}

	stopTests := []struct {
		name    string               // whom the actor stops
		from    trt.Ref[lifecycleDo] // the actor whose Context stops
		target  trt.AnyRef           // the actor it stops
		wantErr error                // nil: the stop is accepted
	}{
		{"a top-level actor", parent, other, trt.ErrNotChild},
		{"a grandchild", parent, grandchild, trt.ErrNotChild},
		{"its parent", kids[1], parent, trt.ErrNotChild},
		{"a sibling", kids[1], kids[2], trt.ErrNotChild},
		{"a child", parent, kids[2], nil},
	}
	for _, tc := range stopTests {
		var got error
		lifecycleRun(t, tc.from, func(ctx *trt.Context[lifecycleDo]) { got = ctx.Stop(tc.target) })
		if !errors.Is(got, tc.wantErr) { // for a nil wantErr: got is nil
			t.Errorf("%s stops %s: got %v, want %v", tc.from.Path(), tc.name, got, tc.wantErr)
		}
	}
	// Only the child was stopped: the others still handle messages.
	for _, ref := range []trt.Ref[lifecycleDo]{other, grandchild, parent, kids[1]} {
		lifecycleRun(t, ref, func(*trt.Context[lifecycleDo]) {})
	}
	eventually(t, "the stopped child leaves Children", func() bool {
		lifecycleRun(t, parent, func(ctx *trt.Context[lifecycleDo]) {
			children = paths(ctx.Children())
			_, c2Found = ctx.Child("c3")
		})
		return slices.Equal(children, []string{"/user/parent/c1", "/user/parent/c2"}) && !c2Found
	})
}

// Stopping an actor stops its whole subtree first: every actor handles
// Stopped after all of its descendants have.
func TestLifecycleStopParentStopsChildrenFirst(t *testing.T) {
	sys := newSystem(t)
	var log lifecycleLog
	parent, err := trt.Spawn(sys, "parent", lifecycleActor(log.onSignal))
	if err != nil {
		t.Fatal(err)
	}
	// parent has c1..c3; c1 and c2 have g1, g2 each.
	lifecycleRun(t, parent, func(ctx *trt.Context[lifecycleDo]) {
		for _, name := range []string{"c1", "c2", "c3"} {
			child, err := trt.Spawn(ctx, name, lifecycleActor(log.onSignal))
			if err != nil {
				panic(err)
			}
			if name == "c3" {
				continue
			}
			child.Tell(func(ctx *trt.Context[lifecycleDo]) {
				for _, name := range []string{"g1", "g2"} {
					if _, err := trt.Spawn(ctx, name, lifecycleActor(log.onSignal)); err != nil {
						panic(err)
					}
				}
			})
		}
	})
	// The grandchildren exist once c1 and c2 have handled the spawning message.
	for _, c := range []string{"c1", "c2"} {
		var child trt.AnyRef
		lifecycleRun(t, parent, func(ctx *trt.Context[lifecycleDo]) { child, _ = ctx.Child(c) })
		lifecycleRun(t, child.(trt.Ref[lifecycleDo]), func(*trt.Context[lifecycleDo]) {})
	}
	terminated := lifecycleWatch(t, sys, parent)
	sys.Stop(parent)
	recv(t, terminated)
	stopped := log.list()
	want := []string{
		"/user/parent", "/user/parent/c1", "/user/parent/c1/g1", "/user/parent/c1/g2",
		"/user/parent/c2", "/user/parent/c2/g1", "/user/parent/c2/g2", "/user/parent/c3",
	}
	if got := slices.Sorted(slices.Values(stopped)); !slices.Equal(got, want) {
		t.Fatalf("actors that handled Stopped: %q, want %q", got, want)
	}
	checkChildrenStopFirst(t, stopped)
}

// Shutdown stops every actor, children before parents, even actors busy
// messaging each other, and leaves no goroutine behind.
func TestLifecycleShutdownStopsEverything(t *testing.T) {
	const top = 1000
	sys := newSystem(t)
	var log lifecycleLog
	var started atomic.Int32
	onSignal := func(ctx *trt.Context[lifecycleDo], sig trt.Signal) {
		log.onSignal(ctx, sig)
		if _, ok := sig.(trt.Started); ok {
			started.Add(1)
		}
	}
	want := 0
	for i := range top {
		name := fmt.Sprintf("a%d", i)
		hasChildren := i%10 == 0
		_, err := trt.Spawn(sys, name, lifecycleActor(func(ctx *trt.Context[lifecycleDo], sig trt.Signal) {
			onSignal(ctx, sig)
			if _, ok := sig.(trt.Started); ok && hasChildren {
				for _, c := range []string{"c1", "c2"} {
					if _, err := trt.Spawn(ctx, c, lifecycleActor(onSignal)); err != nil {
						panic(err)
					}
				}
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		want++
		if hasChildren {
			want += 2
		}
	}
	// Two actors that bounce a message between them for as long as they live.
	var peers [2]trt.Ref[int]
	for i := range peers {
		ref, err := trt.Spawn(sys, fmt.Sprintf("ping%d", i), func() trt.Behavior[int] {
			return trt.ReceiveFunc(func(_ *trt.Context[int], n int) { peers[1-i].Tell(n + 1) })
		})
		if err != nil {
			t.Fatal(err)
		}
		peers[i] = ref
	}
	peers[0].Tell(0)
	eventually(t, "every actor started", func() bool { return int(started.Load()) == want })

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := sys.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	stopped := log.list()
	if len(stopped) != want {
		t.Errorf("%d actors handled Stopped, want %d", len(stopped), want)
	}
	checkChildrenStopFirst(t, stopped)
	before := sys.DeadLetters()
	peers[0].Tell(1)
	if sys.DeadLetters() != before+1 {
		t.Error("a tell after shutdown is not a dead letter")
	}
	goleak.VerifyNone(t)
}

// Shutdown may be called again: after it has finished, it returns nil at
// once; while another call is still stopping actors, it waits for them too.
func TestLifecycleShutdownTwice(t *testing.T) {
	sys := newSystem(t)
	freeStopped := make(chan struct{})
	if _, err := trt.Spawn(sys, "free", lifecycleActor(func(_ *trt.Context[lifecycleDo], sig trt.Signal) {
		if _, ok := sig.(trt.Stopped); ok {
			close(freeStopped)
		}
	})); err != nil {
		t.Fatal(err)
	}
	stuck, err := trt.Spawn(sys, "stuck", lifecycleActor(nil))
	if err != nil {
		t.Fatal(err)
	}
	release := lifecycleBlock(t, stuck)

	first := make(chan error, 1)
	go func() { first <- sys.Shutdown(context.Background()) }()
	recv(t, freeStopped) // the first Shutdown has begun
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := sys.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second Shutdown while an actor cannot stop: got %v, want DeadlineExceeded", err)
	}
	release()
	if err := recv(t, first); err != nil {
		t.Errorf("first Shutdown: %v", err)
	}
	if err := sys.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after Shutdown: %v", err)
	}
}

// A Shutdown whose context ends while an actor blocks in Receive returns the
// context's error; a later Shutdown finishes the job and stops the workers.
func TestLifecycleShutdownDeadline(t *testing.T) {
	sys := newSystem(t)
	stopped := make(chan struct{})
	stuck, err := trt.Spawn(sys, "stuck", lifecycleActor(func(_ *trt.Context[lifecycleDo], sig trt.Signal) {
		if _, ok := sig.(trt.Stopped); ok {
			close(stopped)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	release := lifecycleBlock(t, stuck)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := sys.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with an actor stuck in Receive: got %v, want an error wrapping DeadlineExceeded", err)
	}
	release()
	recv(t, stopped)
	ctx, cancel = context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := sys.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	goleak.VerifyNone(t)
}

// An actor spawned while the system shuts down handles Started before
// Stopped: it is never stopped before it has started.
func TestLifecycleSpawnDuringShutdown(t *testing.T) {
	for range 200 { // the race is narrow: try it many times
		sys := newSystem(t)
		var spawned, unstarted atomic.Int32
		factory := func() trt.Behavior[lifecycleDo] {
			started := false
			return lifecycleActor(func(_ *trt.Context[lifecycleDo], sig trt.Signal) {
				switch sig.(type) {
				case trt.Started:
					started = true
				case trt.Stopped:
					if !started {
						unstarted.Add(1)
					}
				}
			})()
		}
		spawning := make(chan struct{})
		spawnErr := make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				if _, err := trt.Spawn(sys, "", factory); err != nil {
					spawnErr <- err
					return
				}
				spawned.Add(1)
				if i == 10 {
					close(spawning)
				}
				// Let Shutdown run: on one processor this loop would
				// otherwise spawn for a whole time slice at a time.
				goruntime.Gosched()
			}
		}()
		recv(t, spawning)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		err := sys.Shutdown(ctx)
		cancel()
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if err := recv(t, spawnErr); !errors.Is(err, trt.ErrSystemStopped) {
			t.Fatalf("spawn during shutdown: got %v, want ErrSystemStopped", err)
		}
		if n := unstarted.Load(); n != 0 {
			t.Fatalf("%d of %d actors handled Stopped without Started", n, spawned.Load())
		}
	}
}

// A message adapter delivers messages of another type mapped into the
// actor's own; it names the actor, and watching it watches the actor.
func TestLifecycleMessageAdapter(t *testing.T) {
	sys := newSystem(t)
	adapters := make(chan trt.Ref[int], 1)
	got := make(chan string, 16)
	ref, err := trt.Spawn(sys, "adapted", func() trt.Behavior[string] {
		return trt.Funcs[string]{
			Message: func(_ *trt.Context[string], m string) { got <- m },
			Signal: func(ctx *trt.Context[string], sig trt.Signal) {
				if _, ok := sig.(trt.Started); ok {
					adapters <- trt.MessageAdapter(ctx, func(n int) string { return fmt.Sprintf("n=%d", n) })
				}
			},
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	adapter := recv(t, adapters)
	if got, want := adapter.Path(), "/user/adapted/$adapter"; got != want {
		t.Errorf("adapter path %q, want %q", got, want)
	}
	adapter.Tell(7)
	ref.Tell("direct")
	adapter.Tell(8)
	for _, want := range []string{"n=7", "direct", "n=8"} {
		if m := recv(t, got); m != want {
			t.Errorf("got %q, want %q", m, want)
		}
	}
	terminated := lifecycleWatch(t, sys, adapter)
	sys.Stop(ref)
	recv(t, terminated)
	before := sys.DeadLetters()
	adapter.Tell(9)
	if sys.DeadLetters() != before+1 {
		t.Error("a message through the adapter of a stopped actor is not a dead letter")
	}
}

// Become replaces the behavior from the next message on, for messages sent
// directly and through an adapter alike.
func TestLifecycleBecome(t *testing.T) {
	sys := newSystem(t)
	got := make(chan string, 16)
	adapters := make(chan trt.Ref[int], 1)
	ref, err := trt.Spawn(sys, "shifty", func() trt.Behavior[string] {
		second := trt.ReceiveFunc(func(_ *trt.Context[string], m string) { got <- "second:" + m })
		return trt.ReceiveFunc(func(ctx *trt.Context[string], m string) {
			got <- "first:" + m
			switch m {
			case "adapter":
				adapters <- trt.MessageAdapter(ctx, func(n int) string { return fmt.Sprint(n) })
			case "become":
				ctx.Become(second)
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ref.Tell("adapter")
	adapter := recv(t, adapters)
	ref.Tell("a")
	adapter.Tell(1)
	ref.Tell("become")
	ref.Tell("b")
	adapter.Tell(2)
	for _, want := range []string{"first:adapter", "first:a", "first:1", "first:become", "second:b", "second:2"} {
		if m := recv(t, got); m != want {
			t.Errorf("got %q, want %q", m, want)
		}
	}
}
