package workflows_test

import (
	"context"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Gated counts its steps; its "wait" step blocks until the test opens
// gate, or its run is cancelled.
type Gated struct {
	Ran int `json:"ran"`
}

var (
	Gates = workflows.Define("gated", func(string) Gated { return Gated{} })

	Open = workflows.Command(Gates, "open",
		func(ctx *workflows.Ctx[Gated, components.Done], s Gated, _ components.Done) workflows.Effect[Gated, components.Done] {
			return ctx.TransitionTo("wait", nil).ThenReply(components.Done{})
		})

	gate    = make(chan struct{})
	entered = make(chan string, 16)
)

func init() {
	workflows.Step(Gates, "wait",
		func(ctx *workflows.StepCtx[Gated], s Gated, _ any) workflows.StepEffect[Gated] {
			entered <- ctx.IdempotencyKey()
			select {
			case <-gate:
			case <-ctx.Context().Done():
				return ctx.Fail("cancelled")
			}
			s.Ran++
			return ctx.UpdateState(s).End()
		})
}

// TestResumeAfterRestart: an instance stops while a step runs (its outcome
// is not committed); an instance started on the same store finds the
// workflow running in its shard and runs the step again, with the same
// idempotency key, to its end.
func TestResumeAfterRestart(t *testing.T) {
	ctx := context.Background()
	first := start(t, Gates, nil, nil)
	if _, err := Open.Invoke(ctx, first.client, "g-1", components.Done{}); err != nil {
		t.Fatal(err)
	}
	key := <-entered
	if err := first.wf.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if in, _ := first.wf.Get(ctx, "g-1"); in.Status != workflows.StatusRunning || in.Attempt != 0 {
		t.Fatalf("after the stop: %+v, want running at its first attempt", in)
	}

	second := start(t, Gates, first.store, nil)
	if again := <-entered; again != key {
		t.Errorf("the step ran again with key %q, want %q", again, key)
	}
	close(gate)
	in := waitFor(t, second, "g-1", "ended", status[Gated](workflows.StatusEnded))
	if in.State.Ran != 1 {
		t.Errorf("ran %d, want 1", in.State.Ran)
	}
}
