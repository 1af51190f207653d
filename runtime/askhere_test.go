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
	op      string // "where": reply the handling goroutine's id; "block": wait for gate; "panic"
	replyTo trt.Ref[int]
	gate    chan struct{}
	entered chan struct{}
}

// TestAskRunsHere pins where an Ask's request is handled: by an idle
// local actor on the asker's goroutine; by a busy one on a worker, after
// the message it handles; a Receive that panics there fails the actor, as
// on a worker (the asker times out, the actor restarts and answers the
// next ask); a stopped actor's request is a dead letter.
func TestAskRunsHere(t *testing.T) {
	tests := []struct {
		name string
		// busy: the actor is blocked in a Receive when the ask is sent.
		busy, panics, stopped bool
		wantHere              bool // handled on the asker's goroutine
	}{
		{name: "idle", wantHere: true},
		{name: "busy", busy: true},
		{name: "panic", panics: true},
		{name: "stopped", stopped: true},
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
			if tc.panics {
				op = "panic"
			}
			timeout := waitLimit
			if tc.panics || tc.stopped {
				timeout = 20 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			before := sys.DeadLetters()
			type result struct {
				id, asker int
				err       error
			}
			done := make(chan result, 1)
			go func() {
				id, err := trt.Ask(ctx, ref, func(r trt.Ref[int]) hereReq { return hereReq{op: op, replyTo: r} })
				done <- result{id, goroutineID(), err}
			}()
			if tc.busy {
				eventually(t, "the ask queued behind the blocked Receive", func() bool { return trt.Queued(ref) == 1 })
				close(gate)
			}
			res := recv(t, done)
			switch {
			case tc.panics || tc.stopped:
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
