package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Persistent's step "try" fails every run, with four retries whose backoff
// doubles from a second up to three; "wait" runs until its context ends,
// under the default step timeout; "rest" pauses. Its workflow times out
// after an hour, with no timeout step.
type Persistent struct{}

var (
	Persistents = workflows.Define("persistent", func(string) Persistent { return Persistent{} },
		workflows.Timeout(time.Hour, "", nil))

	StartPersistent = workflows.Command(Persistents, "start",
		func(ctx *workflows.Ctx[Persistent, components.Done], _ Persistent, step string) workflows.Effect[Persistent, components.Done] {
			return ctx.TransitionTo(step, nil).ThenReply(components.Done{})
		})
)

// persistentWaiting hears that "wait" runs (its timeout's timer set).
var persistentWaiting = make(chan struct{}, 1)

func init() {
	workflows.Step(Persistents, "try", func(ctx *workflows.StepCtx[Persistent], s Persistent, _ any) workflows.StepEffect[Persistent] {
		return ctx.Fail("not today")
	}, workflows.Retries(4, time.Second, 3*time.Second))
	workflows.Step(Persistents, "wait", func(ctx *workflows.StepCtx[Persistent], s Persistent, _ any) workflows.StepEffect[Persistent] {
		persistentWaiting <- struct{}{}
		<-ctx.Context().Done()
		return ctx.Fail("woken")
	}, workflows.Retries(0, time.Second, time.Second))
	workflows.Step(Persistents, "rest", func(ctx *workflows.StepCtx[Persistent], s Persistent, _ any) workflows.StepEffect[Persistent] {
		return ctx.Pause()
	})
}

// TestBackoffBound: a step's retries wait twice as long each time, up to
// the bound, and with no failover step its last failure fails the
// workflow, keeping the error.
func TestBackoffBound(t *testing.T) {
	e := start(t, Persistents, nil, nil)
	ctx := context.Background()
	if _, err := StartPersistent.Invoke(ctx, e.client, "s-1", "try"); err != nil {
		t.Fatal(err)
	}
	for attempt, wait := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		in := waitFor(t, e, "s-1", "waiting for its retry", func(in workflows.Instance[Persistent]) bool { return in.Attempt == attempt+1 })
		if want := e.clock.Now().Add(wait); !in.NotBefore.Equal(want) {
			t.Errorf("after attempt %d: the retry at %v, want %v (%v on)", attempt+1, in.NotBefore, want, wait)
		}
		e.clock.Advance(wait)
	}
	in := waitFor(t, e, "s-1", "failed", status[Persistent](workflows.StatusFailed))
	if in.Step != "try" || in.Error != "not today" {
		t.Errorf("failed at %q with %q, want at try with its error", in.Step, in.Error)
	}
}

// TestDefaultStepTimeout: a step with no timeout of its own runs for
// DefaultStepTimeout (5 s) at most.
func TestDefaultStepTimeout(t *testing.T) {
	e := start(t, Persistents, nil, nil)
	ctx := context.Background()
	if _, err := StartPersistent.Invoke(ctx, e.client, "s-1", "wait"); err != nil {
		t.Fatal(err)
	}
	<-persistentWaiting
	e.clock.Advance(workflows.DefaultStepTimeout)
	in := waitFor(t, e, "s-1", "failed", status[Persistent](workflows.StatusFailed))
	if want := "ran past its timeout of 5s"; !strings.Contains(in.Error, want) {
		t.Errorf("error %q, want one saying %q", in.Error, want)
	}
}

// TestTimeoutWithoutStep: a workflow timeout with no timeout step fails
// the workflow when it passes.
func TestTimeoutWithoutStep(t *testing.T) {
	e := start(t, Persistents, nil, nil)
	ctx := context.Background()
	if _, err := StartPersistent.Invoke(ctx, e.client, "s-1", "rest"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "s-1", "paused", status[Persistent](workflows.StatusPaused))
	waitTimer(t, e, "s-1")
	e.clock.Advance(time.Hour)
	if err := e.timers.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if in := waitFor(t, e, "s-1", "failed", status[Persistent](workflows.StatusFailed)); in.Error != "the workflow timed out" {
		t.Errorf("error %q, want the workflow timed out", in.Error)
	}
}
