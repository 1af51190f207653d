package workflows_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Two deploys of one workflow ("deploy"): the first has the step "old",
// which runs until its runner stops; the second has "new" instead.
var (
	DeployV1 = workflows.Define("deploy", func(string) Job { return Job{} })
	DeployV2 = workflows.Define("deploy", func(string) Job { return Job{} })

	StartDeploy = workflows.Command(DeployV1, "start",
		func(ctx *workflows.Ctx[Job, components.Done], s Job, _ components.Done) workflows.Effect[Job, components.Done] {
			return ctx.TransitionTo("old", nil).ThenReply(components.Done{})
		})

	// oldRuns gets a value when "old" starts to run.
	oldRuns = make(chan struct{}, 1)
)

func init() {
	workflows.Step(DeployV1, "old", func(ctx *workflows.StepCtx[Job], s Job, _ any) workflows.StepEffect[Job] {
		oldRuns <- struct{}{}
		<-ctx.Context().Done()
		return ctx.Fail("stopped")
	})
	workflows.Step(DeployV2, "new", func(ctx *workflows.StepCtx[Job], s Job, _ any) workflows.StepEffect[Job] {
		s.Done = append(s.Done, "new")
		return ctx.UpdateState(s).End()
	})
}

// TestRemovedStep: an instance stored at a step that the next deploy's
// code no longer has is marked failed with that reason at once (no
// retries), is listed among the failed, refuses a retry's run the same
// way, and an operator's skip to a step the code has ends it.
func TestRemovedStep(t *testing.T) {
	ctx := context.Background()
	v1 := start(t, DeployV1, nil, nil)
	if _, err := StartDeploy.Invoke(ctx, v1.client, "d-1", components.Done{}); err != nil {
		t.Fatal(err)
	}
	<-oldRuns
	if err := v1.wf.Stop(ctx); err != nil { // its run of "old" is not committed
		t.Fatal(err)
	}

	v2 := start(t, DeployV2, v1.store, v1.clock)
	in := waitFor(t, v2, "d-1", "failed", status[Job](workflows.StatusFailed))
	if want := `at step "old", which its code no longer has`; !strings.Contains(in.Error, want) || in.Step != "old" || len(in.History) != 2 {
		t.Errorf("failed at %q with %q after %d entries, want at old, %q, at once", in.Step, in.Error, len(in.History), want)
	}
	failed, _, err := v2.wf.List(ctx, workflows.StatusFailed, 10)
	if err != nil || len(failed) != 1 || failed[0].ID != "d-1" || failed[0].Step != "old" {
		t.Errorf("failed: %+v (%v), want d-1 at old", failed, err)
	}
	if _, err := v2.wf.Operate(ctx, "d-1", workflows.Operation{Action: workflows.Skip, Step: "new"}); err != nil {
		t.Fatal(err)
	}
	in = waitFor(t, v2, "d-1", "ended", status[Job](workflows.StatusEnded))
	if len(in.State.Done) != 1 || in.State.Done[0] != "new" {
		t.Errorf("done %v, want new", in.State.Done)
	}
}
