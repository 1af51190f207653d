package runtime_test

import (
	"bytes"
	"context"
	"errors"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	trt "github.com/trellis-go/trellis/runtime"
)

// goroutineID is the id of the calling goroutine, from its stack's
// header ("goroutine 7 [running]:").
func goroutineID() int {
	var buf [64]byte
	header := buf[:goroutineStack(buf[:])]
	field := bytes.Fields(header)[1]
	id, err := strconv.Atoi(string(field))
	if err != nil {
		panic("no goroutine id in " + string(header))
	}
	return id
}

func goroutineStack(buf []byte) int { return goruntime.Stack(buf, false) }

// hereReq is the protocol of TestAskRunsHere's actor.
type hereReq struct {
	op      string // "where": reply the handling goroutine's id; "block": wait for gate; "panic"; "reply, then panic"
	replyTo trt.Ref[int]
	gate    chan struct{}
	entered chan struct{}
}

// TestAskRunsHere pins where an Ask's request is handled: with a context
// that never ends, by an idle local actor on the asker's goroutine, and
// by a busy one on a worker, after the message it handles; with a
// deadline, always on a worker, so that a Receive that blocks past it
// does not hold the asker (it times out). A Receive that panics on the
// asker's goroutine fails the actor, as on a worker (the actor restarts
// and answers the next ask); a stopped actor's request is a dead letter.
func TestAskRunsHere(t *testing.T) {
	tests := []struct {
		name string
		// deadline: the ask's context has one (else it never ends); busy:
		// the actor is blocked in a Receive when the ask is sent; blocks:
		// the ask's own Receive blocks until the test ends it.
		deadline, busy, blocks, panics, stopped bool
		wantHere                                bool // handled on the asker's goroutine
		wantTimeout                             bool
	}{
		{name: "idle", wantHere: true},
		{name: "idle, with a deadline", deadline: true},
		{name: "busy", busy: true},
		{name: "blocking, with a deadline", deadline: true, blocks: true, wantTimeout: true},
		{name: "panic", panics: true, deadline: true, wantTimeout: true},
		{name: "panic on the asker's goroutine, after the reply", panics: true, wantHere: true},
		{name: "stopped", stopped: true, deadline: true, wantTimeout: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			ref, err := trt.Spawn(sys, "here", func() trt.Behavior[hereReq] {
				return trt.ReceiveFunc(func(_ *trt.Context[hereReq], m hereReq) {
					switch m.op {
					case "where":
						m.replyTo.Tell(goroutineID())
					case "block":
						close(m.entered)
						<-m.gate
					case "panic":
						panic("boom")
					case "reply, then panic":
						m.replyTo.Tell(goroutineID())
						panic("boom")
					}
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.stopped {
				sys.Stop(ref)
				eventually(t, "the actor stopped", func() bool {
					before := sys.DeadLetters()
					ref.Tell(hereReq{op: "none"})
					return sys.DeadLetters() > before
				})
			}
			gate := make(chan struct{})
			if tc.busy {
				entered := make(chan struct{})
				ref.Tell(hereReq{op: "block", gate: gate, entered: entered})
				recv(t, entered)
			}
			op := "where"
			switch {
			case tc.panics && tc.deadline:
				op = "panic"
			case tc.panics:
				op = "reply, then panic" // a context that never ends waits for a reply
			case tc.blocks:
				op = "block"
			}
			ctx := context.Background()
			if tc.deadline {
				timeout := waitLimit
				if tc.wantTimeout {
					timeout = 20 * time.Millisecond
				}
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			blocked := make(chan struct{})
			before := sys.DeadLetters()
			type result struct {
				id, asker int
				err       error
			}
			done := make(chan result, 1)
			go func() {
				id, err := trt.Ask(ctx, ref, func(r trt.Ref[int]) hereReq {
					return hereReq{op: op, replyTo: r, gate: gate, entered: blocked}
				})
				done <- result{id, goroutineID(), err}
			}()
			if tc.busy {
				eventually(t, "the ask queued behind the blocked Receive", func() bool { return trt.Queued(ref) == 1 })
				close(gate)
			}
			res := recv(t, done)
			if tc.blocks {
				close(gate) // the Receive still blocks after the asker gave up
			}
			switch {
			case tc.wantTimeout:
				if !errors.Is(res.err, trt.ErrAskTimeout) {
					t.Fatalf("Ask error = %v, want ErrAskTimeout", res.err)
				}
			case res.err != nil:
				t.Fatalf("Ask: %v", res.err)
			case (res.id == res.asker) != tc.wantHere:
				t.Fatalf("handled on goroutine %d, the asker is %d; want on the asker's: %v", res.id, res.asker, tc.wantHere)
			}
			if tc.stopped {
				if got := sys.DeadLetters(); got != before+1 {
					t.Fatalf("dead letters = %d, want %d", got, before+1)
				}
				return
			}
			ctx2, cancel2 := context.WithTimeout(context.Background(), waitLimit)
			defer cancel2()
			if _, err := trt.Ask(ctx2, ref, func(r trt.Ref[int]) hereReq { return hereReq{op: "where", replyTo: r} }); err != nil {
				t.Fatalf("the next ask: %v", err)
			}
		})
	}
}
