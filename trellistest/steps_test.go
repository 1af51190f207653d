package trellistest_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// walk is the workflow the stepping tests step through: its state is
// the steps that ran. Step "a" goes to "b", which ends it; "fail" fails
// (retried once, after a second); "nap" pauses for an hour, then goes
// to "b". Command "go" moves it to a step, "pause" pauses it for an hour
// (then to "b"). "stall" runs until the service stops.
type walk struct{ Ran []string }

var (
	walks = workflows.Define("trellistest-walk", func(string) walk { return walk{} },
		workflows.Retries(1, time.Second, time.Second))
	walkTo = workflows.Command(walks, "go",
		func(ctx *workflows.Ctx[walk, components.Done], _ walk, step string) workflows.Effect[walk, components.Done] {
			return ctx.TransitionTo(step, nil).ThenReply(components.Done{})
		})
	pauseWalk = workflows.Command(walks, "pause",
		func(ctx *workflows.Ctx[walk, components.Done], _ walk, _ components.Done) workflows.Effect[walk, components.Done] {
			return ctx.UpdateState(walk{}).PauseFor(time.Hour, "b", nil).ThenReply(components.Done{})
		})
)

func init() {
	ran := func(s walk, step string) walk { return walk{Ran: append(s.Ran, step)} }
	workflows.Step(walks, "a", func(ctx *workflows.StepCtx[walk], s walk, _ any) workflows.StepEffect[walk] {
		return ctx.UpdateState(ran(s, "a")).TransitionTo("b", nil)
	})
	workflows.Step(walks, "b", func(ctx *workflows.StepCtx[walk], s walk, _ any) workflows.StepEffect[walk] {
		return ctx.UpdateState(ran(s, "b")).End()
	})
	workflows.Step(walks, "fail", func(ctx *workflows.StepCtx[walk], _ walk, _ any) workflows.StepEffect[walk] {
		return ctx.Fail("it always fails")
	})
	workflows.Step(walks, "stall", func(ctx *workflows.StepCtx[walk], _ walk, _ any) workflows.StepEffect[walk] {
		<-ctx.Context().Done()
		return ctx.Fail("stopped")
	})
	workflows.Step(walks, "nap", func(ctx *workflows.StepCtx[walk], s walk, _ any) workflows.StepEffect[walk] {
		return ctx.UpdateState(ran(s, "nap")).PauseFor(time.Hour, "b", nil)
	})
}

// startWalks starts a service of the walk workflow, its steps held
// unless free.
func startWalks(t *testing.T, free bool) (*trellistest.Service, *workflows.Running[walk]) {
	t.Helper()
	var wf *workflows.Running[walk]
	setup := func(h *trellis.Host, _ chi.Router) error {
		var err error
		wf, err = walks.Start(h.Workflows())
		return err
	}
	opts := []trellistest.Option{trellistest.WithLogger(slog.New(slog.DiscardHandler))}
	if !free {
		opts = append(opts, trellistest.WithSteppedWorkflows())
	}
	return trellistest.Start(t, setup, opts...), wf
}

// move sends the walk id to step.
func move(t *testing.T, ts *trellistest.Service, id, step string) {
	t.Helper()
	if _, err := walkTo.Invoke(context.Background(), ts.Client, id, step); err != nil {
		t.Fatal(err)
	}
}

// fatalOf is a testing.TB whose Fatalf keeps its message and ends the
// goroutine, as the testing package's does.
type fatalOf struct {
	testing.TB
	msg string
}

func (f *fatalOf) Helper() {}

func (f *fatalOf) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalMessage runs f on a goroutine of its own with a fatalOf, and
// returns what f failed with ("" when it returned); it fails t when f
// takes more than limit.
func fatalMessage(t *testing.T, limit time.Duration, f func(tb testing.TB)) string {
	t.Helper()
	tb := &fatalOf{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	trellistest.Recv(t, done, limit)
	return tb.msg
}

// StepWorkflow fails the test at once, saying why, when the instance has
// no step to run now, or the service does not hold its steps; and, once
// its limit has passed, when the step it let run does not settle.
func TestStepWorkflowRefuses(t *testing.T) {
	cases := []struct {
		name    string
		free    bool // the service runs its steps freely
		prepare func(t *testing.T, ts *trellistest.Service, wf *workflows.Running[walk], id string)
		says    string
	}{
		{name: "not stepped", free: true, prepare: func(t *testing.T, ts *trellistest.Service, _ *workflows.Running[walk], id string) {
			move(t, ts, id, "nap")
		}, says: "runs its workflows freely: start it WithSteppedWorkflows()"},
		{name: "not started", says: "has not started"},
		{name: "ended", prepare: func(t *testing.T, ts *trellistest.Service, wf *workflows.Running[walk], id string) {
			move(t, ts, id, "b")
			trellistest.StepWorkflow(t, ts, wf, id, 10*time.Second)
		}, says: "has ended: it has no step left to run"},
		{name: "paused", prepare: func(t *testing.T, ts *trellistest.Service, wf *workflows.Running[walk], id string) {
			move(t, ts, id, "nap")
			trellistest.StepWorkflow(t, ts, wf, id, 10*time.Second)
		}, says: "is paused: no step runs until a command moves it, or its pause lapses 1h0m0s from the clock's now"},
		{name: "retry not due", prepare: func(t *testing.T, ts *trellistest.Service, wf *workflows.Running[walk], id string) {
			move(t, ts, id, "fail")
			trellistest.StepWorkflow(t, ts, wf, id, 10*time.Second)
		}, says: `waits to retry step "fail" (attempt 2) 1s from the clock's now: move the clock there first`},
		{name: "failed", prepare: func(t *testing.T, ts *trellistest.Service, wf *workflows.Running[walk], id string) {
			move(t, ts, id, "fail")
			trellistest.StepWorkflow(t, ts, wf, id, 10*time.Second)
			ts.Clock.Advance(time.Second)
			trellistest.StepWorkflow(t, ts, wf, id, 10*time.Second)
		}, says: `has failed at step "fail"`},
		{name: "a step that does not settle", prepare: func(t *testing.T, ts *trellistest.Service, _ *workflows.Running[walk], id string) {
			move(t, ts, id, "stall")
		}, says: `step "stall" (attempt 1) did not settle within 50ms: the workflow stands running at step "stall"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, wf := startWalks(t, c.free)
			id := "w-" + strings.ReplaceAll(c.name, " ", "-")
			if c.prepare != nil {
				c.prepare(t, ts, wf, id)
			}
			msg := fatalMessage(t, 5*time.Second, func(tb testing.TB) { trellistest.StepWorkflow(tb, ts, wf, id, 50*time.Millisecond) })
			if !strings.Contains(msg, c.says) || !strings.Contains(msg, "trellistest-walk/"+id) {
				t.Errorf("StepWorkflow failed with %q, want it to name trellistest-walk/%s and say %q", msg, id, c.says)
			}
		})
	}
}

// A held instance still moves: a command moves it to another step,
// which is the one the next StepWorkflow runs; a command pauses it; its
// pause's timer moves it to a step again, held in turn.
func TestStepWorkflowHeldInstanceMoves(t *testing.T) {
	ts, wf := startWalks(t, false)
	ctx := context.Background()
	move(t, ts, "w", "a")
	move(t, ts, "w", "b") // while "a" is held
	in := trellistest.StepWorkflow(t, ts, wf, "w", 10*time.Second)
	if in.Status != workflows.StatusEnded || !slices.Equal(in.State.Ran, []string{"b"}) {
		t.Fatalf("moved from a to b, then stepped: %s, ran %v; want ended, ran [b]", in.Status, in.State.Ran)
	}

	move(t, ts, "v", "a")
	if _, err := pauseWalk.Invoke(ctx, ts.Client, "v", components.Done{}); err != nil { // while "a" is held
		t.Fatal(err)
	}
	trellistest.WaitWorkflow(t, wf, "v", 10*time.Second, workflows.StatusPaused)
	trellistest.Eventually(t, 10*time.Second, "the pause's timer is armed", func() bool {
		_, err := ts.Host().Timers.Get(ctx, workflows.TimerName(wf.ComponentID(), "v"))
		return err == nil
	})
	ts.AdvanceTimers(t, time.Hour)
	in = trellistest.WaitWorkflow(t, wf, "v", 10*time.Second, workflows.StatusRunning)
	if in.Step != "b" || len(in.State.Ran) != 0 {
		t.Fatalf("after its pause lapsed: at step %q, ran %v; want held at b, nothing run", in.Step, in.State.Ran)
	}
	if in = trellistest.StepWorkflow(t, ts, wf, "v", 10*time.Second); in.Status != workflows.StatusEnded || !slices.Equal(in.State.Ran, []string{"b"}) {
		t.Fatalf("stepped: %s, ran %v; want ended, ran [b]", in.Status, in.State.Ran)
	}
}

// A service whose runner holds a step stops cleanly, and at once, by a
// shutdown or a kill: the hold ends with the runner (TestMain's goleak
// checks that nothing is left running).
func TestStepWorkflowStopWhileHeld(t *testing.T) {
	stops := []struct {
		name string
		stop func(ts *trellistest.Service) error
	}{
		{"shutdown", func(ts *trellistest.Service) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return ts.Shutdown(ctx)
		}},
		{"kill", func(ts *trellistest.Service) error { ts.Kill(); return nil }},
	}
	for _, c := range stops {
		t.Run(c.name, func(t *testing.T) {
			ts, wf := startWalks(t, false)
			move(t, ts, "w", "a")
			if in := trellistest.StepWorkflow(t, ts, wf, "w", 10*time.Second); in.Step != "b" { // then held at b
				t.Fatalf("stepped a: at step %q, want b", in.Step)
			}
			stopped := make(chan error, 1)
			go func() { stopped <- c.stop(ts) }()
			if err := trellistest.Recv(t, stopped, 10*time.Second); err != nil {
				t.Fatalf("%s the service while a step is held: %v", c.name, err)
			}
		})
	}
}
