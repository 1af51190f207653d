package workflows_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Gated credits wallet "w-<id>" by 1, then waits at its gate: a step
// whose run a test can stop after its entity call and before its commit.
type Gated struct {
	Ran int `json:"ran"`
}

// gateOf is a Gated instance's gate: entered gets the run's key once the
// credit is made, and the run goes on once open is closed.
type gateOf struct {
	entered chan string
	open    chan struct{}
	// inFlight counts the runs of the step under way, on every instance;
	// overlaps the runs that started while another was under way.
	inFlight atomic.Int32
	overlaps atomic.Int32
}

var (
	Gates = workflows.Define("gated", func(string) Gated { return Gated{} })

	Open = workflows.Command(Gates, "open",
		func(ctx *workflows.Ctx[Gated, components.Done], s Gated, _ components.Done) workflows.Effect[Gated, components.Done] {
			return ctx.TransitionTo("wait", nil).ThenReply(components.Done{})
		})

	gates sync.Map // workflow id → *gateOf
)

// newGate makes the gate of instance id.
func newGate(id string) *gateOf {
	g := &gateOf{entered: make(chan string, 16), open: make(chan struct{})}
	gates.Store(id, g)
	return g
}

func init() {
	workflows.Step(Gates, "wait",
		func(ctx *workflows.StepCtx[Gated], s Gated, _ any) workflows.StepEffect[Gated] {
			v, _ := gates.Load(ctx.WorkflowID())
			g := v.(*gateOf)
			if g.inFlight.Add(1) > 1 {
				g.overlaps.Add(1)
			}
			defer g.inFlight.Add(-1)
			if _, err := Credit.Invoke(ctx.Context(), ctx.Client(), "w-"+ctx.WorkflowID(), 1); err != nil {
				return ctx.Fail("credit: %v", err)
			}
			g.entered <- ctx.IdempotencyKey()
			select {
			case <-g.open:
			case <-ctx.Context().Done():
				return ctx.Fail("cancelled")
			}
			s.Ran++
			return ctx.UpdateState(s).End()
		})
}

// TestResumeAfterRestart: an instance stops while steps run, after their
// entity calls and before their commits; an instance started on the same
// store finds the workflows running in their shards (several, read in one
// listing) and runs each step again, with the same idempotency key, to
// its end; the entity applied each step's credit once.
func TestResumeAfterRestart(t *testing.T) {
	ctx := context.Background()
	ids := []string{"g-1", "g-2", "g-3", "g-4", "g-5", "g-6", "g-7", "g-8"}
	first := start(t, Gates, nil, nil)
	keys := make(map[string]string)
	for _, id := range ids {
		g := newGate(id)
		if _, err := Open.Invoke(ctx, first.client, id, components.Done{}); err != nil {
			t.Fatal(err)
		}
		keys[id] = <-g.entered
	}
	if err := first.wf.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if in, _ := first.wf.Get(ctx, id); in.Status != workflows.StatusRunning || in.Attempt != 0 {
			t.Fatalf("after the stop, %s: %+v, want running at its first attempt", id, in)
		}
	}

	second := start(t, Gates, first.store, nil)
	for _, id := range ids {
		g, _ := gates.Load(id)
		select {
		case again := <-g.(*gateOf).entered:
			if again != keys[id] {
				t.Errorf("%s's step ran again with key %q, want %q", id, again, keys[id])
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s was not resumed", id)
		}
		close(g.(*gateOf).open)
	}
	for _, id := range ids {
		in := waitFor(t, second, id, "ended", status[Gated](workflows.StatusEnded))
		if in.State.Ran != 1 {
			t.Errorf("%s ran %d, want 1", id, in.State.Ran)
		}
		wantAppliedOnce(t, second.client, "w-"+id)
	}
}

// wantAppliedOnce checks that wallet id applied one credit, when the
// entities apply a keyed command once (skipped otherwise).
func wantAppliedOnce(t *testing.T, client *components.Client, id string) {
	t.Helper()
	if !keysApplied(t, client) {
		t.Fatal("the store applied a keyed command twice")
	}
	if w := wallet(t, client, id); w.Applied != 1 || w.Balance != 1 {
		t.Errorf("wallet %s: %+v, want the step's credit applied once", id, w)
	}
}

// keysApplied reports whether an entity command invoked twice with one
// idempotency key is applied once.
func keysApplied(t *testing.T, client *components.Client) bool {
	t.Helper()
	ctx := components.WithIdempotencyKey(context.Background(), "probe-key")
	for range 2 {
		if _, err := Credit.Invoke(ctx, client, "probe", 1); err != nil {
			t.Fatal(err)
		}
	}
	return wallet(t, client, "probe").Applied == 1
}
