package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Payment pays Amount once it is approved: a payment over 100 waits for an
// approval for an hour, then expires.
type Payment struct {
	Amount  int    `json:"amount"`
	Outcome string `json:"outcome,omitempty"`
}

var (
	Payments = workflows.Define("payment", func(string) Payment { return Payment{} })

	Pay = workflows.Command(Payments, "pay",
		func(ctx *workflows.Ctx[Payment, components.Done], s Payment, amount int) workflows.Effect[Payment, components.Done] {
			return ctx.UpdateState(Payment{Amount: amount}).TransitionTo("check", nil).ThenReply(components.Done{})
		})
	Approve = workflows.Command(Payments, "approve",
		func(ctx *workflows.Ctx[Payment, components.Done], s Payment, _ components.Done) workflows.Effect[Payment, components.Done] {
			if ctx.Status() != workflows.StatusPaused {
				return ctx.Conflict("payment %s waits for no approval", ctx.WorkflowID())
			}
			return ctx.TransitionTo("settle", "approved").ThenReply(components.Done{})
		})
)

func init() {
	workflows.Step(Payments, "check",
		func(ctx *workflows.StepCtx[Payment], s Payment, _ any) workflows.StepEffect[Payment] {
			if s.Amount > 100 {
				return ctx.PauseFor(time.Hour, "settle", "expired")
			}
			return ctx.TransitionTo("settle", "small")
		})
	workflows.Step(Payments, "settle",
		func(ctx *workflows.StepCtx[Payment], s Payment, how string) workflows.StepEffect[Payment] {
			s.Outcome = how
			return ctx.UpdateState(s).End()
		})
}

// TestPause: a step pauses the workflow with a timeout; a command resumes
// it before the timeout, or the timeout's Trellis timer moves it to its
// lapse step; a small payment never pauses; an approval of a workflow that
// waits for none is refused.
func TestPause(t *testing.T) {
	cases := []struct {
		name    string
		amount  int
		approve bool // approve while paused; else let the pause lapse
		want    string
	}{
		{"small", 50, false, "small"},
		{"approved", 500, true, "approved"},
		{"lapsed", 500, false, "expired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, Payments, nil, nil)
			ctx := context.Background()
			if _, err := Pay.Invoke(ctx, e.client, "p-1", c.amount); err != nil {
				t.Fatal(err)
			}
			if c.amount > 100 {
				in := waitFor(t, e, "p-1", "paused", status[Payment](workflows.StatusPaused))
				if want := e.clock.Now().Add(time.Hour); !in.PauseUntil.Equal(want) {
					t.Errorf("pause until %v, want %v", in.PauseUntil, want)
				}
				waitTimer(t, e, "p-1")
				if c.approve {
					if _, err := Approve.Invoke(ctx, e.client, "p-1", components.Done{}); err != nil {
						t.Fatal(err)
					}
				} else {
					e.clock.Advance(time.Hour)
					if err := e.timers.Settle(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			in := waitFor(t, e, "p-1", "ended", status[Payment](workflows.StatusEnded))
			if in.State.Outcome != c.want {
				t.Errorf("outcome %q, want %q", in.State.Outcome, c.want)
			}
			if c.approve { // the timer fires late and changes nothing
				e.clock.Advance(time.Hour)
				if err := e.timers.Settle(ctx); err != nil {
					t.Fatal(err)
				}
				if again, _ := e.wf.Get(ctx, "p-1"); again.Transition != in.Transition {
					t.Errorf("the stale timer moved the workflow: %+v", again)
				}
			}
			_, err := Approve.Invoke(ctx, e.client, "p-1", components.Done{})
			if err == nil || !strings.Contains(err.Error(), "waits for no approval") {
				t.Errorf("approve after the end: %v", err)
			}
		})
	}
}

// waitTimer waits until the timer that wakes instance id is armed.
func waitTimer[S any](t *testing.T, e *env[S], id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := e.timers.Get(context.Background(), workflows.TimerName(e.wf.ComponentID(), id)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timer of %s was not armed", id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
