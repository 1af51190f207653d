package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	trt "github.com/trellis-go/trellis/runtime"
)

// askReq is the protocol of askServer.
type askReq struct {
	op      string          // "echo": reply val at once; "hold": keep replyTo; "release": reply val to the kept replyTo
	val     string          // the reply
	replyTo trt.Ref[string] // for echo and hold
}

// askServer answers asks at once, or only when the test says so.
type askServer struct {
	Ref      trt.Ref[askReq]
	held     chan struct{} // one value per "hold" handled
	released chan struct{} // one value per "release" handled, after the reply was told
}

func newAskServer(t *testing.T, sys *trt.System, name string) *askServer {
	t.Helper()
	s := &askServer{held: make(chan struct{}, 16), released: make(chan struct{}, 16)}
	ref, err := trt.Spawn(sys, name, s.behavior)
	if err != nil {
		t.Fatalf("spawn ask server: %v", err)
	}
	s.Ref = ref
	return s
}

// behavior makes the server's behavior.
func (s *askServer) behavior() trt.Behavior[askReq] {
	var kept trt.Ref[string]
	return trt.ReceiveFunc(func(_ *trt.Context[askReq], m askReq) {
		switch m.op {
		case "echo":
			m.replyTo.Tell(m.val)
		case "hold":
			kept = m.replyTo
			s.held <- struct{}{}
		case "release":
			kept.Tell(m.val)
			s.released <- struct{}{}
		}
	})
}

// askOp builds a request for Ask and AskFrom.
func askOp(op, val string) func(trt.Ref[string]) askReq {
	return func(r trt.Ref[string]) askReq { return askReq{op: op, val: val, replyTo: r} }
}

// TestAskReply pins that Ask returns the reply the actor sends.
func TestAskReply(t *testing.T) {
	sys := newSystem(t)
	srv := newAskServer(t, sys, "srv")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	got, err := trt.Ask(ctx, srv.Ref, askOp("echo", "pong"))
	if err != nil || got != "pong" {
		t.Fatalf("Ask = %q, %v; want pong, nil", got, err)
	}
}

// TestAskGivesUp pins that an Ask whose context ends returns an error
// wrapping ErrAskTimeout and the context's error, and that the reply sent
// after it gave up is a dead letter that neither blocks nor harms the replier.
func TestAskGivesUp(t *testing.T) {
	tests := []struct {
		name    string // the case
		cancel  bool   // cancel the context once the request arrived (else: a short deadline)
		wantErr error  // the context's error that the Ask error wraps
	}{
		{name: "deadline", wantErr: context.DeadlineExceeded},
		{name: "cancel", cancel: true, wantErr: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			srv := newAskServer(t, sys, "srv")
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			if !tc.cancel {
				ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
			}
			defer cancel()
			type result struct {
				val string
				err error
			}
			done := make(chan result, 1)
			go func() {
				v, err := trt.Ask(ctx, srv.Ref, askOp("hold", ""))
				done <- result{v, err}
			}()
			recv(t, srv.held)
			if tc.cancel {
				cancel()
			}
			res := recv(t, done)
			if !errors.Is(res.err, trt.ErrAskTimeout) || !errors.Is(res.err, tc.wantErr) {
				t.Fatalf("Ask error = %v; want it to wrap %v and %v", res.err, trt.ErrAskTimeout, tc.wantErr)
			}
			if res.val != "" {
				t.Fatalf("Ask value = %q with an error, want the zero value", res.val)
			}

			before := sys.DeadLetters()
			srv.Ref.Tell(askReq{op: "release", val: "late"})
			recv(t, srv.released)
			if got := sys.DeadLetters(); got != before+1 {
				t.Fatalf("dead letters after the late reply = %d, want %d", got, before+1)
			}
			// The replier goes on.
			ctx2, cancel2 := context.WithTimeout(context.Background(), waitLimit)
			defer cancel2()
			if got, err := trt.Ask(ctx2, srv.Ref, askOp("echo", "again")); err != nil || got != "again" {
				t.Fatalf("Ask after the late reply = %q, %v", got, err)
			}
		})
	}
}

// TestAskEntityLateReply pins that Ask works on a sharded entity's ref (an
// address with no actor behind it) and that a reply after the asker gave up
// is a dead letter there too.
func TestAskEntityLateReply(t *testing.T) {
	sys := newSystem(t)
	srv := &askServer{held: make(chan struct{}, 16), released: make(chan struct{}, 16)}
	sh, err := trt.InitSharding(sys, trt.Entity[askReq]{
		Key:    trt.NewEntityTypeKey[askReq]("asked"),
		Create: func(string) trt.Behavior[askReq] { return srv.behavior() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := sh.EntityRef("e1")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if got, err := trt.Ask(ctx, ref, askOp("echo", "pong")); err != nil || got != "pong" {
		t.Fatalf("Ask = %q, %v; want pong, nil", got, err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := trt.Ask(ctx2, ref, askOp("hold", ""))
		done <- err
	}()
	recv(t, srv.held)
	cancel2()
	if err := recv(t, done); !errors.Is(err, trt.ErrAskTimeout) {
		t.Fatalf("Ask error = %v, want ErrAskTimeout", err)
	}
	before := sys.DeadLetters()
	ref.Tell(askReq{op: "release", val: "late"})
	recv(t, srv.released)
	if got := sys.DeadLetters(); got != before+1 {
		t.Fatalf("dead letters after the late reply = %d, want %d", got, before+1)
	}
}

// TestAskEveryReplyAccounted pins that when a reply races the asker giving
// up, the reply is either returned by Ask or counted as a dead letter,
// never silently lost.
func TestAskEveryReplyAccounted(t *testing.T) {
	const n = 2000
	sys := newSystem(t)
	srv := newAskServer(t, sys, "srv")
	before := sys.DeadLetters()
	var answered int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			// Give up at about the time the reply comes.
			build := func(r trt.Ref[string]) askReq {
				go cancel()
				return askReq{op: "echo", val: fmt.Sprint(i), replyTo: r}
			}
			v, err := trt.Ask(ctx, srv.Ref, build)
			cancel()
			switch {
			case err == nil:
				if v != fmt.Sprint(i) {
					t.Errorf("ask %d got reply %q", i, v)
				}
				mu.Lock()
				answered++
				mu.Unlock()
			case !errors.Is(err, trt.ErrAskTimeout):
				t.Errorf("ask %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	// Every request was answered once the server handled a later one.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := trt.Ask(ctx, srv.Ref, askOp("echo", "last")); err != nil {
		t.Fatal(err)
	}
	dead := int(sys.DeadLetters() - before)
	if answered+dead != n {
		t.Fatalf("%d replies returned + %d dead letters = %d, want %d: some replies were lost", answered, dead, answered+dead, n)
	}
}

// askerMsg is the protocol of askAsker.
type askerMsg struct {
	op      string          // "ask": AskFrom to with req; "askStop": ask, then stop itself; "boom": panic; "answer": the adapted reply; "mark": reported
	to      trt.Ref[askReq] // for ask
	req     string          // for ask: the askReq op
	val     string          // for ask: the askReq value; for answer: the reply; for mark: its tag
	timeout time.Duration   // for ask
	err     error           // for answer
}

// newAskAsker starts an actor that asks with AskFrom on command and reports
// the answers and marks it handles.
func newAskAsker(t *testing.T, sys *trt.System, name string) (trt.Ref[askerMsg], chan askerMsg) {
	t.Helper()
	got := make(chan askerMsg, 16)
	ref, err := trt.Spawn(sys, name, func() trt.Behavior[askerMsg] {
		return trt.ReceiveFunc(func(ctx *trt.Context[askerMsg], m askerMsg) {
			switch m.op {
			case "ask", "askStop":
				trt.AskFrom(ctx, m.to, m.timeout, askOp(m.req, m.val), func(resp string, err error) askerMsg {
					return askerMsg{op: "answer", val: resp, err: err}
				})
				if m.op == "askStop" {
					_ = ctx.Stop(ctx.Self())
				}
			case "boom":
				panic("boom")
			default:
				got <- m
			}
		})
	})
	if err != nil {
		t.Fatalf("spawn asker: %v", err)
	}
	return ref, got
}

// askMark sends a marker to the asker and fails unless it is the next
// thing the asker handles.
func askMark(t *testing.T, asker trt.Ref[askerMsg], got <-chan askerMsg, tag string) {
	t.Helper()
	asker.Tell(askerMsg{op: "mark", val: tag})
	if m := recv(t, got); m.op != "mark" || m.val != tag {
		t.Fatalf("asker handled %+v, want mark %q", m, tag)
	}
}

// TestAskFromReply pins that AskFrom delivers the reply to the asking actor
// as the adapted message, and that its timeout then delivers nothing: the
// timer, left set by the reply (see deadlines.Book), fires once for nothing and is
// not set again.
func TestAskFromReply(t *testing.T) {
	fc := newTimersClock()
	sys := newSystem(t, trt.WithClock(fc))
	srv := newAskServer(t, sys, "srv")
	asker, got := newAskAsker(t, sys, "asker")
	asker.Tell(askerMsg{op: "ask", to: srv.Ref, req: "echo", val: "pong", timeout: time.Second})
	m := recv(t, got)
	if m.op != "answer" || m.val != "pong" || m.err != nil {
		t.Fatalf("asker got %+v, want answer pong", m)
	}
	timersAwait(t, fc, 1)
	fc.Advance(time.Second)
	recv(t, fc.fired)                           // the timer's callback has returned
	askMark(t, asker, got, "after the timeout") // so no timeout error came before the mark
	if timersPending(fc, 1) {
		t.Fatal("the ask's timeout timer was set again after it fired with the ask answered")
	}
}

// TestAskFromTimeout pins that an AskFrom without a reply delivers an error
// wrapping ErrAskTimeout exactly when the timeout has passed on the system
// clock, and that a reply after that is a dead letter, not delivered.
func TestAskFromTimeout(t *testing.T) {
	const timeout = time.Second
	fc := clockwork.NewFakeClock()
	sys := newSystem(t, trt.WithClock(fc))
	srv := newAskServer(t, sys, "srv")
	asker, got := newAskAsker(t, sys, "asker")
	asker.Tell(askerMsg{op: "ask", to: srv.Ref, req: "hold", timeout: timeout})
	recv(t, srv.held)
	timersAwait(t, fc, 1)

	fc.Advance(timeout - time.Nanosecond)
	if !timersPending(fc, 1) {
		t.Fatal("the ask timed out before its timeout")
	}
	askMark(t, asker, got, "before")

	fc.Advance(time.Nanosecond)
	m := recv(t, got)
	if m.op != "answer" || !errors.Is(m.err, trt.ErrAskTimeout) || m.val != "" {
		t.Fatalf("asker got %+v, want an answer with an error wrapping ErrAskTimeout", m)
	}

	before := sys.DeadLetters()
	srv.Ref.Tell(askReq{op: "release", val: "late"})
	recv(t, srv.released)
	if n := sys.DeadLetters(); n != before+1 {
		t.Fatalf("dead letters after the late reply = %d, want %d", n, before+1)
	}
	// Had the late reply been delivered, it would be queued ahead of the marker.
	askMark(t, asker, got, "after")
}

// TestAskFromAskerStops pins that an AskFrom whose asking actor stops
// before the reply and the timeout is abandoned: its timeout timer is
// cancelled, so moving the clock past the timeout makes no dead letter,
// and the reply that still comes is the one dead letter (mail to a stopped
// actor).
func TestAskFromAskerStops(t *testing.T) {
	const timeout = time.Second
	tests := []struct {
		name string                                     // the case
		ask  string                                     // the asker's op: "ask", or "askStop" to stop itself while asking
		stop func(sys *trt.System, a trt.Ref[askerMsg]) // stops the asker after the ask, if it does not stop itself
	}{
		{name: "stopped by the system", ask: "ask", stop: func(sys *trt.System, a trt.Ref[askerMsg]) { sys.Stop(a) }},
		{name: "stops itself while asking", ask: "askStop"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			sys := newSystem(t, trt.WithClock(fc))
			srv := newAskServer(t, sys, "srv")
			asker, _ := newAskAsker(t, sys, "asker")
			asker.Tell(askerMsg{op: tc.ask, to: srv.Ref, req: "hold", timeout: timeout})
			recv(t, srv.held)
			if tc.stop != nil {
				timersAwait(t, fc, 1)
				tc.stop(sys, asker)
			}
			// The ask's timer is the only one on the clock.
			eventually(t, "the ask's timeout timer is cancelled when the asker stops", func() bool {
				return !timersPending(fc, 1)
			})

			// With no timer pending, moving past the timeout fires nothing.
			before := sys.DeadLetters()
			fc.Advance(2 * timeout)
			if n := sys.DeadLetters(); n != before {
				t.Fatalf("dead letters after the timeout passed = %d, want %d", n, before)
			}
			srv.Ref.Tell(askReq{op: "release", val: "late"})
			recv(t, srv.released)
			if n := sys.DeadLetters(); n != before+1 {
				t.Fatalf("dead letters after the late reply = %d, want %d", n, before+1)
			}
		})
	}
}

// TestAskFromSurvivesRestart pins that an ask belongs to the actor, not to
// one incarnation of its behavior: after a restart its timeout still comes.
func TestAskFromSurvivesRestart(t *testing.T) {
	const timeout = time.Second
	fc := clockwork.NewFakeClock()
	sys := newSystem(t, trt.WithClock(fc))
	srv := newAskServer(t, sys, "srv")
	asker, got := newAskAsker(t, sys, "asker")
	asker.Tell(askerMsg{op: "ask", to: srv.Ref, req: "hold", timeout: timeout})
	recv(t, srv.held)
	asker.Tell(askerMsg{op: "boom"}) // the first failure restarts at once: no backoff timer
	askMark(t, asker, got, "restarted")
	if !timersPending(fc, 1) {
		t.Fatal("the restart cancelled the ask's timeout timer")
	}
	fc.Advance(timeout)
	if m := recv(t, got); m.op != "answer" || !errors.Is(m.err, trt.ErrAskTimeout) {
		t.Fatalf("asker got %+v after the restart, want the ask's timeout", m)
	}
}

// TestAskFromTimeoutWhileAskerStopping pins that a timeout that passes
// while the asker is stopping (waiting for a child) is dropped, as the
// asker's own timers would be, rather than made a dead letter.
func TestAskFromTimeoutWhileAskerStopping(t *testing.T) {
	const timeout = time.Second
	fc := newTimersClock()
	sys := newSystem(t, trt.WithClock(fc))
	srv := newAskServer(t, sys, "srv")
	gate := make(chan struct{}) // the child blocks on it, so the asker stays stopping
	blocked := make(chan struct{}, 1)
	asker, err := trt.Spawn(sys, "asker", func() trt.Behavior[string] {
		return trt.ReceiveFunc(func(ctx *trt.Context[string], m string) {
			if m != "go" {
				return
			}
			child, err := trt.Spawn(ctx, "slow", func() trt.Behavior[struct{}] {
				return trt.ReceiveFunc(func(*trt.Context[struct{}], struct{}) {
					blocked <- struct{}{}
					<-gate
				})
			})
			if err != nil {
				panic(err)
			}
			child.Tell(struct{}{})
			trt.AskFrom(ctx, srv.Ref, timeout, askOp("hold", ""), func(string, error) string { return "answer" })
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	asker.Tell("go")
	recv(t, blocked)
	recv(t, srv.held)
	sys.Stop(asker)
	defer close(gate) // lets the asker finish, before the system shuts down

	// Stop reaches the asker at once (system messages overtake), but its
	// child cannot stop before the gate opens: the asker is stopping.
	eventually(t, "the asker is stopping", func() bool {
		before := sys.DeadLetters()
		asker.Tell("probe")
		return sys.DeadLetters() == before+1
	})
	before := sys.DeadLetters()
	fc.Advance(timeout)
	if d := recv(t, fc.fired); d != timeout {
		t.Fatalf("a timer of %v fired, want the ask's %v", d, timeout)
	}
	if n := sys.DeadLetters(); n != before {
		t.Fatalf("dead letters after the timeout passed = %d, want %d", n, before)
	}
}
