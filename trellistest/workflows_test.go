package trellistest_test

import (
	"strings"
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
