package transfer_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/samples/transfer"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(trellistest.Servers(m)) }

// scenario is one transfer of the walkthrough: the wallets' money before,
// what the test does while it runs, and the outcome, balances and undo
// steps after.
type scenario struct {
	name        string
	fund        int  // put in the source wallet first
	amount      int  // moved
	frozen      bool // the destination wallet is frozen
	decide      func(t *testing.T, ts *trellistest.Service, id string)
	outcome     string
	from, toBal int
	fees        int      // what the fees wallet gains
	undone      []string // the undo steps run, in order
}

// approve and reject answer a transfer that waits for an approval; lapse
// lets its wait lapse on the fake clock.
func approve(t *testing.T, ts *trellistest.Service, id string) {
	if _, err := transfer.Approve.Invoke(context.Background(), ts.Client, id, components.Done{}); err != nil {
		t.Fatal(err)
	}
}

func reject(t *testing.T, ts *trellistest.Service, id string) {
	if _, err := transfer.Reject.Invoke(context.Background(), ts.Client, id, components.Done{}); err != nil {
		t.Fatal(err)
	}
}

func lapse(t *testing.T, ts *trellistest.Service, _ string) {
	ts.AdvanceTimers(t, transfer.ApprovalWait)
}

var scenarios = []scenario{
	{name: "done", fund: 100, amount: 30, outcome: "done", from: 69, toBal: 30, fees: 1},
	{name: "refused", fund: 100, amount: 500, outcome: "refused: withdraw 505 from wallet refused-from: the balance is 100", from: 100},
	{name: "compensated", fund: 100, amount: 30, frozen: true, outcome: "compensated", from: 100, undone: []string{"take-back-fee", "refund"}},
	{name: "approved", fund: 5000, amount: 2000, decide: approve, outcome: "done", from: 2980, toBal: 2000, fees: 20},
	{name: "rejected", fund: 5000, amount: 2000, decide: reject, outcome: "rejected", from: 5000},
	{name: "approval timed out", fund: 5000, amount: 2000, decide: lapse, outcome: "approval timed out", from: 5000},
}

// TestWalkthrough runs each scenario on the embedded store, and on Redis
// in the cluster mode.
func TestWalkthrough(t *testing.T) {
	for _, store := range []string{"embedded", "redis"} {
		t.Run(store, func(t *testing.T) {
			app := &transfer.App{}
			opts := []trellistest.Option{trellistest.WithLogger(slog.New(slog.DiscardHandler)),
				trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = walkAdminToken })}
			ts := startOn(t, store, app, opts...)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { run(t, ts, app, sc) })
			}
		})
	}
}

// startOn starts the sample on store: "embedded", or "redis" (in the
// cluster mode, a cluster of one, its shards settled).
func startOn(t *testing.T, store string, app *transfer.App, opts ...trellistest.Option) *trellistest.Service {
	t.Helper()
	if store != "redis" {
		return trellistest.Start(t, app.Setup, opts...)
	}
	ts := trellistest.StartInstances(t, 1, app.Setup, opts...)[0]
	trellistest.WaitSettled(t, ts)
	return ts
}

// walkAdminToken is the admin API's token of TestWalkthrough's services.
const walkAdminToken = "walkthrough-admin-token"

// run runs one scenario.
func run(t *testing.T, ts *trellistest.Service, app *transfer.App, sc scenario) {
	ctx := context.Background()
	id := sc.name
	fees, err := transfer.GetWallet.Invoke(ctx, ts.Client, transfer.FeesWallet, components.Done{})
	if err != nil {
		t.Fatal(err)
	}
	from, to := beginFunded(t, ts, id, sc.fund, sc.amount, sc.frozen)
	if sc.decide != nil {
		trellistest.WaitWorkflow(t, app.Transfers, id, 10*time.Second, workflows.StatusPaused)
		trellistest.Eventually(t, 10*time.Second, "the approval's timer is armed, in the admin API", func() bool {
			req, err := http.NewRequest(http.MethodGet, ts.URL+"/admin/timers/"+url.PathEscape(workflows.TimerName("transfer", id)), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+walkAdminToken)
			resp, err := ts.Send(req)
			return err == nil && resp.Status == http.StatusOK
		})
		sc.decide(t, ts, id)
	}
	// The deposit's retries wait on the fake clock: RunWorkflow moves it.
	trellistest.RunWorkflow(t, ts, app.Transfers, id, 20*time.Second, workflows.StatusEnded)
	got, err := transfer.GetTransfer.Invoke(ctx, ts.Client, id, components.Done{})
	if err != nil || got.Outcome != sc.outcome || !slices.Equal(got.Undone, sc.undone) {
		t.Errorf("outcome %q, undone %v (%v), want %q, %v", got.Outcome, got.Undone, err, sc.outcome, sc.undone)
	}
	for wallet, want := range map[string]int{from: sc.from, to: sc.toBal, transfer.FeesWallet: fees.Balance + sc.fees} {
		if w, err := transfer.GetWallet.Invoke(ctx, ts.Client, wallet, components.Done{}); err != nil || w.Balance != want {
			t.Errorf("wallet %s: %+v (%v), want a balance of %d", wallet, w, err, want)
		}
	}
}

// beginFunded puts fund in wallet id-from, freezes wallet id-to or not,
// and begins transfer id of amount from the one to the other: it returns
// the two wallets.
func beginFunded(t *testing.T, ts *trellistest.Service, id string, fund, amount int, frozen bool) (from, to string) {
	t.Helper()
	ctx := context.Background()
	from, to = id+"-from", id+"-to"
	if _, err := transfer.Deposit.Invoke(ctx, ts.Client, from, fund); err != nil {
		t.Fatal(err)
	}
	if _, err := transfer.Freeze.Invoke(ctx, ts.Client, to, frozen); err != nil {
		t.Fatal(err)
	}
	if _, err := transfer.Begin.Invoke(ctx, ts.Client, id, transfer.Transfer{From: from, To: to, Amount: amount}); err != nil {
		t.Fatal(err)
	}
	return from, to
}
