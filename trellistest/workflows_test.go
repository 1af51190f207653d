package trellistest_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// doomed is a workflow whose one step always fails, with no retry: it
// fails as soon as it starts.
var (
	doomed      = workflows.Define("trellistest-doomed", func(string) string { return "" })
	startDoomed = workflows.Command(doomed, "start",
		func(ctx *workflows.Ctx[string, components.Done], _ string, _ components.Done) workflows.Effect[string, components.Done] {
			return ctx.TransitionTo("call", nil).ThenReply(components.Done{})
		})
)

func init() {
	workflows.Step(doomed, "call", func(ctx *workflows.StepCtx[string], _ string, _ any) workflows.StepEffect[string] {
		return ctx.Fail("the other side said no")
	}, workflows.Retries(0, time.Second, time.Second))
}

// TestWaitWorkflowSaysWhereItStands: WaitWorkflow returns the instance
// once it stands at a status asked for; one that never does fails the
// test saying where it stands, its step and its error.
func TestWaitWorkflowSaysWhereItStands(t *testing.T) {
	var wf *workflows.Running[string]
	ts := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) (err error) {
		wf, err = doomed.Start(h.Workflows())
		return err
	})
	if _, err := startDoomed.Invoke(t.Context(), ts.Client, "d-1", components.Done{}); err != nil {
		t.Fatal(err)
	}
	if in := trellistest.WaitWorkflow(t, wf, "d-1", 10*time.Second, workflows.StatusFailed); in.Step != "call" {
		t.Errorf("failed at %q, want call", in.Step)
	}

	msg := fatalMessage(t, 10*time.Second, func(tb testing.TB) {
		trellistest.WaitWorkflow(tb, wf, "d-1", 50*time.Millisecond, workflows.StatusEnded, workflows.StatusPaused)
	})
	for _, want := range []string{"d-1", "ended, paused", `failed at step "call"`, "the other side said no"} {
		if !strings.Contains(msg, want) {
			t.Errorf("WaitWorkflow failed with %q, want it to say %q", msg, want)
		}
	}
}

// flaky is a workflow whose one step fails twice before it ends, retried
// after a minute, then two: on the fake clock, which nothing moves but
// RunWorkflow.
var (
	flaky      = workflows.Define("trellistest-flaky", func(string) int { return 0 })
	flakyRuns  atomic.Int64 // the runs of its step (one instance per test run)
	startFlaky = workflows.Command(flaky, "start",
		func(ctx *workflows.Ctx[int, components.Done], _ int, _ components.Done) workflows.Effect[int, components.Done] {
			return ctx.TransitionTo("call", nil).ThenReply(components.Done{})
		})
)

func init() {
	workflows.Step(flaky, "call", func(ctx *workflows.StepCtx[int], _ int, _ any) workflows.StepEffect[int] {
		if runs := flakyRuns.Add(1); runs < 3 {
			return ctx.Fail("run %d fails", runs)
		}
		return ctx.UpdateState(int(flakyRuns.Load())).End()
	}, workflows.Retries(5, time.Minute, time.Hour))
}

// TestRunWorkflowMovesTheClockToRetries: RunWorkflow moves the service's
// clock to each retry's time, so a step that fails twice ends on its
// third run, three minutes of the clock later; WaitWorkflow leaves the
// clock where it is.
func TestRunWorkflowMovesTheClockToRetries(t *testing.T) {
	flakyRuns.Store(0)
	var wf *workflows.Running[int]
	ts := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) (err error) {
		wf, err = flaky.Start(h.Workflows())
		return err
	})
	start := ts.Clock.Now()
	if _, err := startFlaky.Invoke(t.Context(), ts.Client, "f-1", components.Done{}); err != nil {
		t.Fatal(err)
	}
	trellistest.WaitWorkflow(t, wf, "f-1", 10*time.Second, workflows.StatusRunning)
	if in := trellistest.RunWorkflow(t, ts, wf, "f-1", 10*time.Second, workflows.StatusEnded); in.State != 3 {
		t.Errorf("ended after %d runs, want 3", in.State)
	}
	if moved := ts.Clock.Since(start); moved != 3*time.Minute {
		t.Errorf("the clock moved %v, want 3m0s (a minute, then two)", moved)
	}
}

// TestTypeRunningFindsTheRunner: a workflow type's Running finds, on a
// service's host, the runner its Start returned, typed; not a type that
// was not started there.
func TestTypeRunningFindsTheRunner(t *testing.T) {
	var wf *workflows.Running[int]
	ts := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) (err error) {
		wf, err = flaky.Start(h.Workflows())
		return err
	})
	if got, ok := flaky.Running(ts.Host().Workflows()); !ok || got != wf {
		t.Errorf("flaky.Running = %p, %v; want %p, true", got, ok, wf)
	}
	if got, ok := doomed.Running(ts.Host().Workflows()); ok || got != nil {
		t.Errorf("doomed.Running = %p, %v; want nil, false (not started)", got, ok)
	}
}
