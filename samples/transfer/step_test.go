package transfer_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/samples/transfer"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// oneStep is one StepWorkflow of a transfer: what the test does first,
// then where the transfer stands after the step, the history entries the
// two added ("step#attempt: outcome", "" for a command's or a timer's
// move), the transfer's outcome and the wallets.
type oneStep struct {
	before  func(t *testing.T, ts *trellistest.Service, id string)
	stands  string // see stands
	added   []string
	outcome string
	// wallets are the balances of the sender and the recipient, and what
	// the fees wallet gained.
	wallets [3]int
}

// advance moves the fake clock by d before the step: a retry waits out
// its backoff on it.
func advance(d time.Duration) func(*testing.T, *trellistest.Service, string) {
	return func(_ *testing.T, ts *trellistest.Service, _ string) { ts.Clock.Advance(d) }
}

// TestStepThrough steps transfers one step run at a time
// (trellistest.StepWorkflow on a service WithSteppedWorkflows) and
// checks, after each run, where the transfer stands, what its history
// gained, its outcome, both wallets and the fees: a done transfer; one
// whose deposit fails (the destination is frozen) through its retries,
// each waited out on the fake clock, then compensates in reverse order;
// and two that pause for an approval, one approved by a command, one
// given up when its pause's timer fires.
//
// It runs on the embedded store, and on Redis in the cluster mode.
func TestStepThrough(t *testing.T) {
	for _, store := range []string{"embedded", "redis"} {
		t.Run(store, func(t *testing.T) {
			app := &transfer.App{}
			opts := []trellistest.Option{trellistest.WithSteppedWorkflows(), trellistest.WithLogger(slog.New(slog.DiscardHandler))}
			stepThrough(t, startOn(t, store, app, opts...), app)
		})
	}
}

// stepThrough runs TestStepThrough's cases on ts.
func stepThrough(t *testing.T, ts *trellistest.Service, app *transfer.App) {
	cases := []struct {
		name         string
		fund, amount int
		frozen       bool // the destination takes no deposit
		steps        []oneStep
	}{
		{name: "done", fund: 100, amount: 30, steps: []oneStep{
			{stands: "running withdraw", added: []string{"check#1: to withdraw"}, wallets: [3]int{100, 0, 0}},
			{stands: "running pay-fee", added: []string{"withdraw#1: to pay-fee"}, wallets: [3]int{69, 0, 0}},
			{stands: "running deposit", added: []string{"pay-fee#1: to deposit"}, wallets: [3]int{69, 0, 1}},
			{stands: "ended", added: []string{"deposit#1: ended"}, outcome: "done", wallets: [3]int{69, 30, 1}},
		}},
		{name: "compensated", fund: 100, amount: 30, frozen: true, steps: []oneStep{
			{stands: "running withdraw", added: []string{"check#1: to withdraw"}, wallets: [3]int{100, 0, 0}},
			{stands: "running pay-fee", added: []string{"withdraw#1: to pay-fee"}, wallets: [3]int{69, 0, 0}},
			{stands: "running deposit", added: []string{"pay-fee#1: to deposit"}, wallets: [3]int{69, 0, 1}},
			{stands: "running deposit, 1 failed, retried in 1s", added: []string{"deposit#1: retry"}, wallets: [3]int{69, 0, 1}},
			{before: advance(time.Second), stands: "running deposit, 2 failed, retried in 2s", added: []string{"deposit#2: retry"}, wallets: [3]int{69, 0, 1}},
			{before: advance(2 * time.Second), stands: "running deposit, 3 failed, retried in 4s", added: []string{"deposit#3: retry"}, wallets: [3]int{69, 0, 1}},
			{before: advance(4 * time.Second), stands: "running compensate", added: []string{"deposit#4: failover to compensate"}, wallets: [3]int{69, 0, 1}},
			{stands: "running take-back-fee", added: []string{"compensate#1: to take-back-fee"}, wallets: [3]int{69, 0, 1}},
			{stands: "running compensate", added: []string{"take-back-fee#1: to compensate"}, wallets: [3]int{69, 0, 0}},
			{stands: "running refund", added: []string{"compensate#1: to refund"}, wallets: [3]int{69, 0, 0}},
			{stands: "running compensate", added: []string{"refund#1: to compensate"}, wallets: [3]int{100, 0, 0}},
			{stands: "ended", added: []string{"compensate#1: ended"}, outcome: "compensated", wallets: [3]int{100, 0, 0}},
		}},
		{name: "approved", fund: 5000, amount: 2000, steps: []oneStep{
			{stands: "paused", added: []string{"check#1: paused"}, wallets: [3]int{5000, 0, 0}},
			{before: approve, stands: "running pay-fee", added: []string{": to withdraw", "withdraw#1: to pay-fee"}, wallets: [3]int{2980, 0, 0}},
			{stands: "running deposit", added: []string{"pay-fee#1: to deposit"}, wallets: [3]int{2980, 0, 20}},
			{stands: "ended", added: []string{"deposit#1: ended"}, outcome: "done", wallets: [3]int{2980, 2000, 20}},
		}},
		{name: "approval timed out", fund: 5000, amount: 2000, steps: []oneStep{
			{stands: "paused", added: []string{"check#1: paused"}, wallets: [3]int{5000, 0, 0}},
			{before: lapse, stands: "ended", added: []string{": lapsed to give-up", "give-up#1: ended"}, outcome: "approval timed out", wallets: [3]int{5000, 0, 0}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := c.name
			fees := balance(t, ts, transfer.FeesWallet) // the fees of the transfers before
			from, to := beginFunded(t, ts, id, c.fund, c.amount, c.frozen)
			seen := 1 // the history's entries so far: Begin's move to check
			for i, step := range c.steps {
				if step.before != nil {
					step.before(t, ts, id)
				}
				in := trellistest.StepWorkflow(t, ts, app.Transfers, id, 10*time.Second)
				added := entries(in.History[min(seen, len(in.History)):])
				seen = len(in.History)
				wallets := [3]int{balance(t, ts, from), balance(t, ts, to), balance(t, ts, transfer.FeesWallet) - fees}
				if got := stands(in, ts.Clock.Now()); got != step.stands || !slices.Equal(added, step.added) || in.State.Outcome != step.outcome ||
					wallets != step.wallets {
					t.Fatalf("after step %d: the transfer stands %q, added %q to its history, outcome %q, wallets %v; want %q, %q, %q, %v",
						i+1, got, added, in.State.Outcome, wallets, step.stands, step.added, step.outcome, step.wallets)
				}
			}
		})
	}
}

// stands is where in stands at now: "status step" (a running step),
// and its failed attempts and when it is retried.
func stands(in workflows.Instance[transfer.Transfer], now time.Time) string {
	if in.Status != workflows.StatusRunning {
		return string(in.Status)
	}
	s := string(in.Status) + " " + in.Step
	if in.Attempt > 0 {
		s += fmt.Sprintf(", %d failed, retried in %v", in.Attempt, in.NotBefore.Sub(now))
	}
	return s
}

// entries names history entries "step#attempt: outcome" (": outcome" for
// a command's or a timer's move).
func entries(h []workflows.Entry) []string {
	names := make([]string, 0, len(h))
	for _, e := range h {
		if e.Step == "" {
			names = append(names, ": "+e.Outcome)
			continue
		}
		names = append(names, fmt.Sprintf("%s#%d: %s", e.Step, e.Attempt, e.Outcome))
	}
	return names
}

// balance is wallet w's balance.
func balance(t *testing.T, ts *trellistest.Service, w string) int {
	t.Helper()
	got, err := transfer.GetWallet.Invoke(context.Background(), ts.Client, w, components.Done{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Balance
}
