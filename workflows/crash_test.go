package workflows_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
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

// Careless is a workflow whose one step credits a wallet without its
// step's key (on a context of its own): a run of the step again after a
// crash applies the credit twice.
var Careless = workflows.Define("careless", func(string) Transfer { return Transfer{} })

var BeginCareless = workflows.Command(Careless, "begin",
	func(ctx *workflows.Ctx[Transfer, components.Done], _ Transfer, _ components.Done) workflows.Effect[Transfer, components.Done] {
		return ctx.TransitionTo("pay", nil).ThenReply(components.Done{})
	})

func init() {
	workflows.Step(Careless, "pay", func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
		if _, err := Credit.Invoke(context.Background(), ctx.Client(), "to", 1); err != nil {
			return ctx.Fail("pay: %v", err)
		}
		return ctx.End()
	})
}

// carelessEnv makes TestCrashKitCountsWrites's child run the kit on
// Careless.
const carelessEnv = "TRELLIS_TEST_CRASH_CARELESS"

// TestCrashKitCountsWrites: the crash kit fails a workflow that applies
// an entity command twice when a step runs again, by its count of the
// entity's writes alone (the scenario's outcome holds no balance). The
// kit runs in a child process of this test binary, whose failure is the
// point.
func TestCrashKitCountsWrites(t *testing.T) {
	if os.Getenv(carelessEnv) == "1" {
		setup := func(h *trellis.Host, _ chi.Router) error {
			if _, err := Wallets.Start(h.Entities()); err != nil {
				return err
			}
			wf, err := Careless.Start(h.Workflows())
			carelessWF = wf
			return err
		}
		trellistest.CrashWorkflows(t, setup, func(t testing.TB, ts *trellistest.Service) workflows.Status {
			if _, err := BeginCareless.Invoke(context.Background(), ts.Client, "k-1", components.Done{}); err != nil {
				t.Fatal(err)
			}
			return trellistest.WaitWorkflow(t, carelessWF, "k-1", 10*time.Second, workflows.StatusEnded).Status
		}, trellistest.WithLogger(slog.New(slog.DiscardHandler)))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestCrashKitCountsWrites$", "-test.count", "1")
	cmd.Env = append(os.Environ(), carelessEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the kit's run on a careless workflow: %v, want it to fail; output:\n%s", err, out)
	}
	if want := `crashed at "careless k-1: after step pay (transition 1, attempt 1)": the entities were written map[wallet/to:2] times, want map[wallet/to:1]`; !strings.Contains(string(out), want) {
		t.Errorf("the kit's failure does not say %q; output:\n%s", want, out)
	}
}

// carelessWF is Careless's runner in the child run.
var carelessWF *workflows.Running[Transfer]
