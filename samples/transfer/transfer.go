package transfer

import (
	"errors"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Transfer is a transfer's request and where it stands.
type Transfer struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int    `json:"amount"`
	// Fee is what the sender pays on top of Amount into the fees wallet
	// (FeeOf(Amount), set when the transfer begins).
	Fee int `json:"fee,omitempty"`
	// Outcome is "" while it runs, then "done", "refused: ...",
	// "compensated", "rejected" or "approval timed out".
	Outcome string `json:"outcome,omitempty"`
	// Undo is what to undo if a later step keeps failing; Undone, the
	// undo steps a compensation ran, in order.
	Undo   workflows.Undo `json:"undo,omitempty"`
	Undone []string       `json:"undone,omitempty"`
}

// ApprovalWait is how long a transfer waits for an approval before it
// gives up. cmd/server sets it from TRANSFER_APPROVAL_WAIT.
var ApprovalWait = 24 * time.Hour

// Settings of the sample.
const (
	// ApprovalAbove is the amount above which a transfer waits for an
	// approval.
	ApprovalAbove = 1000
	// FeesWallet is the wallet the transfers' fees are paid into; it
	// takes part in no transfer.
	FeesWallet = "fees"
)

// FeeOf is the fee of a transfer of amount: 1 %, at least 1.
func FeeOf(amount int) int { return max(1, amount/100) }

// Transfers is the transfer workflow, one per transfer id.
var Transfers = workflows.Define("transfer", func(string) Transfer { return Transfer{} })

var (
	// Begin starts a transfer, once (409 the second time).
	Begin = workflows.Command(Transfers, "begin",
		func(ctx *workflows.Ctx[Transfer, Transfer], _ Transfer, req Transfer) workflows.Effect[Transfer, Transfer] {
			switch {
			case ctx.Status() != workflows.StatusNotStarted:
				return ctx.Conflict("transfer %s has started already", ctx.WorkflowID())
			case req.Amount <= 0 || req.From == "" || req.To == "" || req.From == req.To:
				return ctx.Invalid("a transfer moves a positive amount between two wallets")
			case req.From == FeesWallet || req.To == FeesWallet:
				return ctx.Invalid("the %s wallet takes part in no transfer", FeesWallet)
			}
			req.Fee = FeeOf(req.Amount)
			return ctx.UpdateState(req).TransitionTo("check", nil).ThenReply(req)
		})
	// Approve lets a transfer that waits for an approval go on.
	Approve = workflows.Command(Transfers, "approve",
		func(ctx *workflows.Ctx[Transfer, components.Done], _ Transfer, _ components.Done) workflows.Effect[Transfer, components.Done] {
			if ctx.Status() != workflows.StatusPaused {
				return ctx.Conflict("transfer %s waits for no approval", ctx.WorkflowID())
			}
			return ctx.TransitionTo("withdraw", nil).ThenReply(components.Done{})
		})
	// Reject ends a transfer that waits for an approval.
	Reject = workflows.Command(Transfers, "reject",
		func(ctx *workflows.Ctx[Transfer, components.Done], s Transfer, _ components.Done) workflows.Effect[Transfer, components.Done] {
			if ctx.Status() != workflows.StatusPaused {
				return ctx.Conflict("transfer %s waits for no approval", ctx.WorkflowID())
			}
			s.Outcome = "rejected"
			return ctx.UpdateState(s).End().ThenReply(components.Done{})
		})
	// GetTransfer reads a transfer.
	GetTransfer = workflows.Command(Transfers, "get",
		func(ctx *workflows.Ctx[Transfer, Transfer], s Transfer, _ components.Done) workflows.Effect[Transfer, Transfer] {
			if ctx.Status() == workflows.StatusNotStarted {
				return ctx.NotFound("no transfer %s", ctx.WorkflowID())
			}
			return ctx.Reply(s)
		})
)

func init() {
	// check: a large amount waits for an approval, then gives up.
	workflows.Step(Transfers, "check",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			if s.Amount > ApprovalAbove {
				return ctx.PauseFor(ApprovalWait, "give-up", nil)
			}
			return ctx.TransitionTo("withdraw", nil)
		})
	workflows.Step(Transfers, "give-up",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			s.Outcome = "approval timed out"
			return ctx.UpdateState(s).End()
		})
	// withdraw: takes the amount and the fee from the sender; a refusal
	// ends the transfer; a failure is retried.
	workflows.Step(Transfers, "withdraw",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			_, err := Withdraw.Invoke(ctx.Context(), ctx.Client(), s.From, s.Amount+s.Fee)
			var refused *components.CommandError
			switch {
			case errors.As(err, &refused):
				s.Outcome = "refused: " + refused.Message
				return ctx.UpdateState(s).End()
			case err != nil:
				return ctx.Fail("withdraw: %v", err)
			}
			s.Undo.Push("refund", s.Amount+s.Fee)
			return ctx.UpdateState(s).TransitionTo("pay-fee", nil)
		})
	// pay-fee and deposit: a failure (a frozen wallet too) is retried;
	// out of retries, the transfer compensates.
	compensated := []workflows.Option{workflows.Retries(3, time.Second, 10*time.Second), workflows.FailoverTo("compensate", nil)}
	workflows.Step(Transfers, "pay-fee",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			if _, err := Deposit.Invoke(ctx.Context(), ctx.Client(), FeesWallet, s.Fee); err != nil {
				return ctx.Fail("pay the fee: %v", err)
			}
			s.Undo.Push("take-back-fee", s.Fee)
			return ctx.UpdateState(s).TransitionTo("deposit", nil)
		}, compensated...)
	workflows.Step(Transfers, "deposit",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			if _, err := Deposit.Invoke(ctx.Context(), ctx.Client(), s.To, s.Amount); err != nil {
				return ctx.Fail("deposit: %v", err)
			}
			s.Outcome, s.Undo = "done", nil
			return ctx.UpdateState(s).End()
		}, compensated...)
	// compensate undoes what was done, in reverse order: the fee taken
	// back, then the withdrawal refunded.
	workflows.Step(Transfers, "compensate",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			if next, ok := s.Undo.Pop(); ok {
				s.Undone = append(s.Undone, next.Step)
				return ctx.UpdateState(s).TransitionTo(next.Step, next.Input)
			}
			s.Outcome = "compensated"
			return ctx.UpdateState(s).End()
		})
	workflows.Step(Transfers, "refund",
		func(ctx *workflows.StepCtx[Transfer], s Transfer, amount int) workflows.StepEffect[Transfer] {
			if _, err := Deposit.Invoke(ctx.Context(), ctx.Client(), s.From, amount); err != nil {
				return ctx.Fail("refund: %v", err)
			}
			return ctx.TransitionTo("compensate", nil)
		})
	workflows.Step(Transfers, "take-back-fee",
		func(ctx *workflows.StepCtx[Transfer], _ Transfer, fee int) workflows.StepEffect[Transfer] {
			if _, err := Withdraw.Invoke(ctx.Context(), ctx.Client(), FeesWallet, fee); err != nil {
				return ctx.Fail("take back the fee: %v", err)
			}
			return ctx.TransitionTo("compensate", nil)
		})
}

// App is the sample in a service: Setup starts the wallets and the
// transfers, and keeps the transfers' runner for the tests to inspect.
type App struct {
	Transfers *workflows.Running[Transfer]
}

// Setup starts the wallets and the transfer workflow on h, and adds the
// transfer routes (Routes) to r.
func (a *App) Setup(h *trellis.Host, r chi.Router) error {
	if _, err := Wallets.Start(h.Entities()); err != nil {
		return err
	}
	wf, err := Transfers.Start(h.Workflows())
	if err != nil {
		return err
	}
	a.Transfers = wf
	Routes(r, h.Client)
	return nil
}
