package workflows_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Transfer moves Amount from From to To: withdraw, deposit, end; a deposit
// that keeps failing fails over to refund.
type Transfer struct {
	From   string   `json:"from"`
	To     string   `json:"to"`
	Amount int      `json:"amount"`
	Steps  []string `json:"steps,omitempty"`
}

var (
	Transfers = workflows.Define("transfer", func(string) Transfer { return Transfer{} },
		workflows.Retries(2, 100*time.Millisecond, time.Second))

	Begin = workflows.Command(Transfers, "begin",
		func(ctx *workflows.Ctx[Transfer, Transfer], s Transfer, req Transfer) workflows.Effect[Transfer, Transfer] {
			if ctx.Status() != workflows.StatusNotStarted {
				return ctx.Conflict("transfer %s has started already", ctx.WorkflowID())
			}
			return ctx.UpdateState(req).TransitionTo("withdraw", req.Amount).ThenReply(req)
		})
	GetTransfer = workflows.Command(Transfers, "get",
		func(ctx *workflows.Ctx[Transfer, Transfer], s Transfer, _ components.Done) workflows.Effect[Transfer, Transfer] {
			return ctx.Reply(s)
		})
	// Jump moves the transfer to any step: a bad step name is the
	// caller's error.
	Jump = workflows.Command(Transfers, "jump",
		func(ctx *workflows.Ctx[Transfer, components.Done], s Transfer, step string) workflows.Effect[Transfer, components.Done] {
			return ctx.TransitionTo(step, s.Amount).ThenReply(components.Done{})
		})

	// failDeposits makes the deposit step fail while it is positive.
	failDeposits atomic.Int32
)

func init() {
	workflows.Step(Transfers, "withdraw",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, amount int) workflows.StepEffect[Transfer] {
			if _, err := Debit.Invoke(ctx.Context(), ctx.Client(), s.From, amount); err != nil {
				return ctx.Fail("withdraw: %v", err)
			}
			s.Steps = append(s.Steps, "withdraw")
			return ctx.UpdateState(s).TransitionTo("deposit", amount)
		})
	workflows.Step(Transfers, "deposit",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, amount int) workflows.StepEffect[Transfer] {
			if failDeposits.Load() > 0 {
				return ctx.Fail("deposit: the bank is closed")
			}
			if _, err := Credit.Invoke(ctx.Context(), ctx.Client(), s.To, amount); err != nil {
				return ctx.Fail("deposit: %v", err)
			}
			s.Steps = append(s.Steps, "deposit")
			return ctx.UpdateState(s).End()
		}, workflows.FailoverTo("refund", nil))
	workflows.Step(Transfers, "refund",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			if _, err := Credit.Invoke(ctx.Context(), ctx.Client(), s.From, s.Amount); err != nil {
				return ctx.Fail("refund: %v", err)
			}
			s.Steps = append(s.Steps, "refund")
			return ctx.UpdateState(s).End()
		})
}

// fund puts n in wallet id.
func fund(t testing.TB, client *components.Client, id string, n int) {
	t.Helper()
	if _, err := Credit.Invoke(context.Background(), client, id, n); err != nil {
		t.Fatal(err)
	}
}

// TestTransferRunsToItsEnd: a command starts the workflow; its steps run
// one after the other on the runner, each committing its state and the
// next step; the entities see each effect once.
func TestTransferRunsToItsEnd(t *testing.T) {
	e := start(t, Transfers, nil, nil)
	ctx := context.Background()
	fund(t, e.client, "alice", 100)
	if _, err := Begin.Invoke(ctx, e.client, "t-1", Transfer{From: "alice", To: "bob", Amount: 30}); err != nil {
		t.Fatal(err)
	}
	in := waitFor(t, e, "t-1", "ended", status[Transfer](workflows.StatusEnded))
	if got := strings.Join(in.State.Steps, ","); got != "withdraw,deposit" {
		t.Errorf("steps %q, want withdraw,deposit", got)
	}
	if a, b := wallet(t, e.client, "alice"), wallet(t, e.client, "bob"); a.Balance != 70 || b.Balance != 30 || b.Applied != 1 {
		t.Errorf("alice %+v, bob %+v; want 70 and 30, each applied once", a, b)
	}
	var outcomes []string
	for _, h := range in.History {
		outcomes = append(outcomes, h.Step+":"+h.Outcome)
	}
	if got := strings.Join(outcomes, " "); got != ":to withdraw withdraw:to deposit deposit:ended" {
		t.Errorf("history %q", got)
	}
	if in.Transition != 3 {
		t.Errorf("transition %d, want 3", in.Transition)
	}
	// The reply of a command that reads.
	if s, err := GetTransfer.Invoke(ctx, e.client, "t-1", components.Done{}); err != nil || s.Amount != 30 {
		t.Errorf("get: %+v, %v", s, err)
	}
}

// TestCommandRefusals: a command's refusal, a move to a step the workflow
// does not have, and a change of an ended workflow are each the caller's
// error, with its kind, and change nothing.
func TestCommandRefusals(t *testing.T) {
	e := start(t, Transfers, nil, nil)
	ctx := context.Background()
	fund(t, e.client, "carol", 10)
	if _, err := Begin.Invoke(ctx, e.client, "t-2", Transfer{From: "carol", To: "dan", Amount: 5}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "t-2", "ended", status[Transfer](workflows.StatusEnded))
	cases := []struct {
		name string
		call func() error
		kind components.ErrorKind
		says string
	}{
		{"start twice", func() error {
			_, err := Begin.Invoke(ctx, e.client, "t-2", Transfer{Amount: 1})
			return err
		}, components.Conflict, "has started already"},
		{"unknown step", func() error {
			_, err := Jump.Invoke(ctx, e.client, "t-3", "teleport")
			return err
		}, components.Invalid, `step "teleport", which workflow transfer does not have`},
		{"change an ended workflow", func() error {
			_, err := Jump.Invoke(ctx, e.client, "t-2", "deposit")
			return err
		}, components.Conflict, "has ended: it takes no more changes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var ce *components.CommandError
			if !errors.As(err, &ce) || ce.Kind != c.kind || !strings.Contains(ce.Message, c.says) {
				t.Fatalf("error %v, want a %v refusal saying %q", err, c.kind, c.says)
			}
		})
	}
	if in, _ := e.wf.Get(ctx, "t-3"); in.Status != workflows.StatusNotStarted {
		t.Errorf("t-3 after a refused move: %+v", in)
	}
}

// TestRetriesThenFailover: a step that fails is retried after its backoff
// (on the fake clock), and once out of retries the workflow goes to the
// step's failover step, which compensates.
func TestRetriesThenFailover(t *testing.T) {
	failDeposits.Store(1)
	defer failDeposits.Store(0)
	e := start(t, Transfers, nil, nil)
	ctx := context.Background()
	fund(t, e.client, "erin", 50)
	if _, err := Begin.Invoke(ctx, e.client, "t-4", Transfer{From: "erin", To: "frank", Amount: 20}); err != nil {
		t.Fatal(err)
	}
	// Retries(2, 100ms, 1s): attempt 1 fails, a retry after 100ms, another
	// after 200ms, then the failover.
	for attempt, wait := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		in := waitFor(t, e, "t-4", "waiting for its retry", func(in workflows.Instance[Transfer]) bool {
			return in.Step == "deposit" && in.Attempt == attempt+1
		})
		if want := in.History[len(in.History)-1].At.Add(wait); !in.NotBefore.Equal(want) {
			t.Errorf("attempt %d: retry at %v, want %v", attempt+1, in.NotBefore, want)
		}
		if !strings.Contains(in.Error, "the bank is closed") {
			t.Errorf("error %q", in.Error)
		}
		e.clock.BlockUntilContext(ctx, 1)
		e.clock.Advance(wait)
	}
	in := waitFor(t, e, "t-4", "ended", status[Transfer](workflows.StatusEnded))
	if got := strings.Join(in.State.Steps, ","); got != "withdraw,refund" {
		t.Errorf("steps %q, want withdraw,refund", got)
	}
	if w := wallet(t, e.client, "erin"); w.Balance != 50 {
		t.Errorf("erin %+v: the refund did not give the money back", w)
	}
	if last := in.History[len(in.History)-2]; last.Outcome != "failover to refund" || last.Attempt != 3 {
		t.Errorf("history %+v", in.History)
	}
}
