package workflows_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// Crashy is a transfer of three steps: withdraw and deposit, each one
// entity command, then note, none.
var Crashy = workflows.Define("crashy", func(string) Transfer { return Transfer{} })

var BeginCrashy = workflows.Command(Crashy, "begin",
	func(ctx *workflows.Ctx[Transfer, Transfer], _ Transfer, req Transfer) workflows.Effect[Transfer, Transfer] {
		return ctx.UpdateState(req).TransitionTo("withdraw", nil).ThenReply(req)
	})

func init() {
	call := func(name string, cmd func(ctx *workflows.StepCtx[Transfer], s Transfer) error, next string) {
		workflows.Step(Crashy, name, func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			if cmd != nil {
				if err := cmd(ctx, s); err != nil {
					return ctx.Fail("%s: %v", name, err)
				}
			}
			s.Steps = append(s.Steps, name)
			if next == "" {
				return ctx.UpdateState(s).End()
			}
			return ctx.UpdateState(s).TransitionTo(next, nil)
		})
	}
	call("withdraw", func(ctx *workflows.StepCtx[Transfer], s Transfer) error {
		_, err := Debit.Invoke(ctx.Context(), ctx.Client(), s.From, s.Amount)
		return err
	}, "deposit")
	call("deposit", func(ctx *workflows.StepCtx[Transfer], s Transfer) error {
		_, err := Credit.Invoke(ctx.Context(), ctx.Client(), s.To, s.Amount)
		return err
	}, "note")
	call("note", nil, "")
}

// crashyOutcome is what a crash run is checked against: the workflow's
// steps and transitions, and each wallet's balance and count of commands
// applied.
type crashyOutcome struct {
	steps      string
	transition uint64
	from, to   Wallet
}

// TestCrashPoints runs a transfer under the test kit's crash mode
// (trellistest.CrashWorkflows): the runner crashes before and after each
// step in turn, and each run ends as the run without a crash does — the
// same steps done, the same transitions, each wallet's command applied
// once (its count of commands applied, and its writes).
func TestCrashPoints(t *testing.T) {
	var wf *workflows.Running[Transfer]
	setup := func(h *trellis.Host, _ chi.Router) error {
		if _, err := Wallets.Start(h.Entities()); err != nil {
			return err
		}
		var err error
		wf, err = Crashy.Start(h.Workflows())
		return err
	}
	points := trellistest.CrashWorkflows(t, setup, func(t testing.TB, ts *trellistest.Service) crashyOutcome {
		fund(t, ts.Client, "from", 100)
		if _, err := BeginCrashy.Invoke(context.Background(), ts.Client, "c-1", Transfer{From: "from", To: "to", Amount: 30}); err != nil {
			t.Fatal(err)
		}
		in := trellistest.WaitWorkflow(t, wf, "c-1", 10*time.Second, workflows.StatusEnded)
		out := crashyOutcome{steps: strings.Join(in.State.Steps, ","), transition: in.Transition,
			from: wallet(t, ts.Client, "from"), to: wallet(t, ts.Client, "to")}
		if out.from != (Wallet{Balance: 70, Applied: 2}) || out.to != (Wallet{Balance: 30, Applied: 1}) {
			t.Errorf("the wallets are %+v and %+v, want each command applied once", out.from, out.to)
		}
		return out
	}, trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	if len(points) != 6 {
		t.Errorf("the transfer passed %d crash points, want 2 per step: %v", len(points), points)
	}
}
