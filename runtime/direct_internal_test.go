package runtime

import (
	"context"
	"io"
	"log/slog"
	goruntime "runtime"
	"slices"
	"testing"
	"time"
)

// directMsg is the protocol of the actor these tests run directly.
type directMsg struct {
	n        int             // recorded in handled
	adapter  chan Ref[int]   // answer with a DirectAdapter
	postpone *bool           // set PostponeWakeups (with n: record n, else -1)
	gate     chan struct{}   // block on it while handling
	entered  chan<- struct{} // with gate: say so before blocking
	boom     bool            // panic
	_        [0]func()       // not comparable
}

// directActor is an actor of directMsg, its cell, a DirectAdapter to it
// (of ints, recorded as handled; -n records n and ends postponing), and
// what it has handled.
type directActor struct {
	ref     Ref[directMsg]
	c       *cell[directMsg]
	direct  Ref[int]
	handled chan int
}

func startDirect(t *testing.T, opts ...Option) (*System, *directActor) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := NewSystem(t.Name(), append([]Option{WithWorkers(2), WithLogger(quiet)}, opts...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	a := &directActor{handled: make(chan int, 64)}
	ref, err := Spawn(sys, "direct", func() Behavior[directMsg] {
		return ReceiveFunc(func(ctx *Context[directMsg], m directMsg) {
			switch {
			case m.adapter != nil:
				m.adapter <- DirectAdapter(ctx, func(n int) directMsg {
					if n < 0 { // -n, and end postponing
						off := false
						return directMsg{n: -n, postpone: &off}
					}
					return directMsg{n: n}
				})
			case m.postpone != nil:
				ctx.PostponeWakeups(*m.postpone)
				if m.n == 0 {
					m.n = -1 // an acknowledgement
				}
				a.handled <- m.n
			case m.gate != nil:
				m.entered <- struct{}{}
				<-m.gate
				a.handled <- m.n
			case m.boom:
				panic("boom")
			default:
				a.handled <- m.n
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	a.ref, a.c = ref, ref.(*cell[directMsg])
	ch := make(chan Ref[int], 1)
	ref.Tell(directMsg{adapter: ch})
	a.direct = recvWithin(t, ch)
	return sys, a
}

// setPostpone turns the actor's PostponeWakeups on or off and waits until
// it has, and until the actor is idle again.
func (a *directActor) setPostpone(t *testing.T, on bool) {
	t.Helper()
	a.ref.Tell(directMsg{postpone: &on})
	if got := recvWithin(t, a.handled); got != -1 {
		t.Fatalf("handled %d, want the acknowledgement", got)
	}
	a.waitIdle(t)
}

// waitIdle waits until nothing runs the actor's mailbox.
func (a *directActor) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.c.mu.Lock()
		idle := !a.c.scheduled
		a.c.mu.Unlock()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the actor never went idle")
		}
		goruntime.Gosched()
	}
}

// handledNow returns what the actor has handled so far, without waiting.
func (a *directActor) handledNow() []int {
	var got []int
	for {
		select {
		case n := <-a.handled:
			got = append(got, n)
		default:
			return got
		}
	}
}

func recvWithin[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received within 5 s")
		panic("unreachable")
	}
}

// A message through a DirectAdapter to an idle actor is handled before
// Tell returns, on the sender's goroutine.
func TestDirectAdapterRunsIdleActorAtOnce(t *testing.T) {
	_, a := startDirect(t)
	a.waitIdle(t)
	a.direct.Tell(1)
	if got := a.handledNow(); !slices.Equal(got, []int{1}) {
		t.Fatalf("handled %v when Tell returned, want [1]", got)
	}
	a.direct.Tell(2) // idle again: the direct run left it so
	if got := a.handledNow(); !slices.Equal(got, []int{2}) {
		t.Fatalf("handled %v when the second Tell returned, want [2]", got)
	}
}

// To an actor that is running, a DirectAdapter queues like Tell: the sender
// does not wait, and the message is handled after the one running.
func TestDirectAdapterBusyActorQueues(t *testing.T) {
	_, a := startDirect(t)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	a.ref.Tell(directMsg{n: 1, gate: gate, entered: entered})
	recvWithin(t, entered)
	a.direct.Tell(2) // returns at once, though the actor is blocked
	close(gate)
	for _, want := range []int{1, 2} {
		if got := recvWithin(t, a.handled); got != want {
			t.Fatalf("handled %d, want %d", got, want)
		}
	}
}

// While an actor postpones its wake-ups, TellPostponable only holds the
// mail: other mail wakes the actor, but the held mail waits, in order,
// until it stops postponing.
func TestPostponeWakeups(t *testing.T) {
	tests := []struct {
		name     string               // the case
		postpone bool                 // the actor's PostponeWakeups
		wake     func(a *directActor) // sent after the postponable mail; nil: nothing
		direct   bool                 // wake is a DirectAdapter Tell: what it brings is handled before it returns
		want     []int                // handled after wake, before postponing is turned off
	}{
		{name: "not postponing: scheduled as by Tell", want: []int{1, 2}},
		{name: "woken by a DirectAdapter", postpone: true, wake: func(a *directActor) { a.direct.Tell(3) }, direct: true, want: []int{3}},
		{name: "woken by Tell", postpone: true, wake: func(a *directActor) { a.ref.Tell(directMsg{n: 3}) }, want: []int{3}},
		{name: "a direct message that ends postponing", postpone: true, wake: func(a *directActor) { a.direct.Tell(-3) }, direct: true, want: []int{3, 1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, a := startDirect(t)
			a.setPostpone(t, tc.postpone)
			TellPostponable(a.ref, directMsg{n: 1})
			TellPostponable(a.ref, directMsg{n: 2})
			if tc.postpone {
				a.c.mu.Lock()
				scheduled := a.c.scheduled
				a.c.mu.Unlock()
				if queued := int(a.c.held.Load().n.Load()); scheduled || queued != 2 {
					t.Fatalf("postponing: scheduled %v with %d held, want not scheduled with 2", scheduled, queued)
				}
			}
			if tc.wake != nil {
				tc.wake(a)
			}
			if tc.direct {
				if got := a.handledNow(); !slices.Equal(got, tc.want) {
					t.Fatalf("handled %v when the direct Tell returned, want %v", got, tc.want)
				}
			} else {
				for _, w := range tc.want {
					if got := recvWithin(t, a.handled); got != w {
						t.Fatalf("handled %d, want %d", got, w)
					}
				}
			}
			if !tc.postpone || slices.Contains(tc.want, 1) {
				return
			}
			a.waitIdle(t)
			if got := a.handledNow(); len(got) != 0 {
				t.Fatalf("handled %v while postponing, want the held mail kept", got)
			}
			a.setPostpone(t, false) // the held mail follows
			for _, w := range []int{1, 2} {
				if got := recvWithin(t, a.handled); got != w {
					t.Fatalf("handled %d after postponing ended, want %d", got, w)
				}
			}
		})
	}
}

// A direct run handles at most the throughput budget on the sender's
// goroutine and leaves the rest, in order, to the dispatcher.
func TestDirectAdapterBudget(t *testing.T) {
	_, a := startDirect(t, WithThroughput(2))
	a.setPostpone(t, true)
	for n := 1; n <= 4; n++ {
		TellPostponable(a.ref, directMsg{n: n})
	}
	a.direct.Tell(-5) // ends postponing: the held mail follows it
	got := a.handledNow()
	if len(got) < 2 || got[0] != 5 || got[1] != 1 {
		t.Fatalf("handled %v when the direct Tell returned, want at least [5 1]", got)
	}
	for len(got) < 5 {
		got = append(got, recvWithin(t, a.handled))
	}
	if !slices.Equal(got, []int{5, 1, 2, 3, 4}) {
		t.Fatalf("handled %v, want [5 1 2 3 4]", got)
	}
}

// A panic in a direct run is the actor's failure, handled by its
// supervision (here: restart); the sender goes on.
func TestDirectAdapterPanic(t *testing.T) {
	_, a := startDirect(t)
	a.setPostpone(t, true)
	TellPostponable(a.ref, directMsg{boom: true})
	a.direct.Tell(-7) // ends postponing, so the panicking message runs next; must not panic here
	if got := recvWithin(t, a.handled); got != 7 {
		t.Fatalf("handled %d, want 7", got)
	}
	a.direct.Tell(8)
	if got := recvWithin(t, a.handled); got != 8 {
		t.Fatalf("handled %d after the restart, want 8", got)
	}
}
