package transfer_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/samples/transfer"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// crashOutcome is what a crash run is checked against: each transfer's
// outcome and each wallet's balance.
type crashOutcome struct {
	Transfers map[string]string
	Wallets   map[string]int
}

// TestCrashPoints runs a transfer that compensates (its destination is
// frozen), one that is approved and one whose approval times out, crashing the runner at each of their crash points in turn
// (trellistest.CrashWorkflows): each run ends as the run without a crash
// does, and no withdrawal or deposit is applied twice.
func TestCrashPoints(t *testing.T) {
	app := &transfer.App{}
	points := trellistest.CrashWorkflows(t, app.Setup, func(t testing.TB, ts *trellistest.Service) crashOutcome {
		ctx := context.Background()
		for w, funds := range map[string]int{"alice": 100, "carol": 5000} {
			if _, err := transfer.Deposit.Invoke(ctx, ts.Client, w, funds); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := transfer.Freeze.Invoke(ctx, ts.Client, "frozen", true); err != nil {
			t.Fatal(err)
		}
		begin := func(id string, req transfer.Transfer) {
			t.Helper()
			if _, err := transfer.Begin.Invoke(ctx, ts.Client, id, req); err != nil {
				t.Fatal(err)
			}
		}
		// The compensated transfer's deposit retries wait on the fake
		// clock: RunWorkflow moves it to each retry's time once the
		// transfer waits for it (then no step runs, so none times out).
		begin("compensated", transfer.Transfer{From: "alice", To: "frozen", Amount: 20})
		trellistest.RunWorkflow(t, ts, app.Transfers, "compensated", 20*time.Second, workflows.StatusEnded)
		begin("approved", transfer.Transfer{From: "carol", To: "dave", Amount: 2000})
		begin("timed out", transfer.Transfer{From: "carol", To: "erin", Amount: 1500})
		for _, id := range []string{"approved", "timed out"} {
			trellistest.WaitWorkflow(t, app.Transfers, id, 30*time.Second, workflows.StatusPaused)
			trellistest.Eventually(t, 10*time.Second, "the approval's timer of "+id+" is armed", func() bool {
				_, err := ts.Host().Timers.Get(ctx, workflows.TimerName("transfer", id))
				return err == nil
			})
		}
		if _, err := transfer.Approve.Invoke(ctx, ts.Client, "approved", components.Done{}); err != nil {
			t.Fatal(err)
		}
		trellistest.WaitWorkflow(t, app.Transfers, "approved", 30*time.Second, workflows.StatusEnded)
		ts.AdvanceTimers(t, transfer.ApprovalWait)

		out := crashOutcome{Transfers: map[string]string{}, Wallets: map[string]int{}}
		for _, id := range []string{"compensated", "approved", "timed out"} {
			in := trellistest.WaitWorkflow(t, app.Transfers, id, 30*time.Second, workflows.StatusEnded)
			out.Transfers[id] = in.State.Outcome
		}
		for _, w := range []string{"alice", "carol", "dave", "erin", "frozen", transfer.FeesWallet} {
			got, err := transfer.GetWallet.Invoke(ctx, ts.Client, w, components.Done{})
			if err != nil {
				t.Fatal(err)
			}
			out.Wallets[w] = got.Balance
		}
		return out
	}, trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	if len(points) < 20 {
		t.Errorf("the transfers passed %d crash points, want every step's two and each pause's: %v", len(points), points)
	}
}
