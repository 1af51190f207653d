package workflows_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/workflows"
)

// Charge debits a wallet in its step "debit", then fails while
// chargeFail is set. With a retry two days after a failure, its next run
// comes after the entities' key retention (a day) has passed.
type Charge struct{}

var (
	Charges = workflows.Define("charge", func(string) Charge { return Charge{} })

	StartCharge = workflows.Command(Charges, "start",
		func(ctx *workflows.Ctx[Charge, components.Done], s Charge, retry time.Duration) workflows.Effect[Charge, components.Done] {
			return ctx.TransitionTo("debit", nil).ThenReply(components.Done{})
		})

	chargeFail atomic.Bool
)

func init() {
	workflows.Step(Charges, "debit", func(ctx *workflows.StepCtx[Charge], s Charge, _ any) workflows.StepEffect[Charge] {
		if _, err := Debit.Invoke(ctx.Context(), ctx.Client(), "payer", 1); err != nil {
			return ctx.Fail("debit: %v", err)
		}
		if chargeFail.Load() {
			return ctx.Fail("the card was declined")
		}
		return ctx.End()
	}, workflows.Retries(1, 48*time.Hour, 48*time.Hour), workflows.FailoverTo("refund", nil))
	workflows.Step(Charges, "refund", func(ctx *workflows.StepCtx[Charge], s Charge, _ any) workflows.StepEffect[Charge] {
		return ctx.End()
	})
}

// TestStaleKeysNotRun: a step whose next run comes after the entities'
// key retention (counted from when the step was entered) is not run, for
// its entity commands could be applied twice; the workflow fails (no
// retry, no failover) naming why. An operator's retry then runs it, the
// keys counted from the retry; before the retention passes, a retry runs
// under the keys it had, and a command already applied is not applied
// again.
func TestStaleKeysNotRun(t *testing.T) {
	if entities.DefaultKeyRetention >= 48*time.Hour {
		t.Fatalf("the retry two days on must come after the keys' retention %v", entities.DefaultKeyRetention)
	}
	chargeFail.Store(true)
	t.Cleanup(func() { chargeFail.Store(false) })
	// The entities keep their keys on the test's clock, as Redis keeps
	// them on its own.
	clock := clockwork.NewFakeClockAt(time.Now().Truncate(time.Millisecond))
	store := entities.NewMemoryStore()
	store.SetClock(clock)
	e := start(t, Charges, store, clock)
	ctx := context.Background()
	fund(t, e.client, "payer", 10)
	if _, err := StartCharge.Invoke(ctx, e.client, "c-1", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "c-1", "waiting two days for its retry", func(in workflows.Instance[Charge]) bool { return in.Attempt == 1 })
	if w := wallet(t, e.client, "payer"); w.Applied != 2 { // the funding and one debit
		t.Fatalf("wallet %+v after the first run, want 2 applied", w)
	}

	e.clock.Advance(48 * time.Hour)
	in := waitFor(t, e, "c-1", "failed", status[Charge](workflows.StatusFailed))
	if in.Step != "debit" || !strings.Contains(in.Error, "may have expired") || !strings.Contains(in.Error, `"debit"`) {
		t.Errorf("failed at %q with %q; want at debit, saying its keys may have expired", in.Step, in.Error)
	}
	if w := wallet(t, e.client, "payer"); w.Applied != 2 {
		t.Errorf("wallet %+v after the stale run, want still 2 applied (the step did not run)", w)
	}

	// The operator retries knowingly: the step runs (its debit applied
	// again, as its key expired), and fails its retries' worth again
	// under keys counted from now.
	if _, err := e.wf.Operate(ctx, "c-1", workflows.Operation{Action: workflows.Retry}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "c-1", "waiting for its retry", func(in workflows.Instance[Charge]) bool { return in.Attempt == 1 })
	if w := wallet(t, e.client, "payer"); w.Applied != 3 {
		t.Errorf("wallet %+v after the operator's retry, want 3 applied", w)
	}
	chargeFail.Store(false)
	if _, err := e.wf.Operate(ctx, "c-1", workflows.Operation{Action: workflows.Retry}); err != nil { // now, within the day
		t.Fatal(err)
	}
	waitFor(t, e, "c-1", "ended", status[Charge](workflows.StatusEnded))
	if w := wallet(t, e.client, "payer"); w.Applied != 3 {
		t.Errorf("wallet %+v after a retry within the retention, want still 3 applied (the debit answered from its key)", w)
	}
}
