package main

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// The checkout's steps: load the cart, reserve each line, wait for an
// approval above ApprovalAbove, charge the customer. An order that cannot
// go on compensates: it releases, in reverse order, what it reserved.
func init() {
	// A step whose calls keep failing compensates once out of retries.
	compensated := []workflows.Option{workflows.Retries(2, time.Second, time.Second), workflows.FailoverTo("compensate", "")}

	// load reads the cart: only a checked-out one is ordered.
	workflows.Step(Checkouts, "load",
		func(ctx *workflows.StepCtx[Order], o Order, _ any) workflows.StepEffect[Order] {
			c, err := GetCart.Invoke(ctx.Context(), ctx.Client(), ctx.WorkflowID(), components.Done{})
			switch {
			case refused(err) || err == nil && !c.CheckedOut:
				o.Outcome = "cart " + ctx.WorkflowID() + " is not checked out"
				return ctx.UpdateState(o).End()
			case err != nil:
				return ctx.Fail("read the cart: %v", err)
			}
			for sku, n := range c.Items {
				o.Lines = append(o.Lines, Line{SKU: sku, Quantity: n})
			}
			slices.SortFunc(o.Lines, func(a, b Line) int { return strings.Compare(a.SKU, b.SKU) })
			return ctx.UpdateState(o).TransitionTo("reserve", 0)
		})

	// reserve reserves line i, then the next; a line out of stock
	// cancels the order.
	workflows.Step(Checkouts, "reserve",
		func(ctx *workflows.StepCtx[Order], o Order, i int) workflows.StepEffect[Order] {
			l := o.Lines[i]
			price, err := Reserve.Invoke(ctx.Context(), ctx.Client(), l.SKU, Reservation{Order: ctx.WorkflowID(), Quantity: l.Quantity})
			switch {
			case refused(err):
				return ctx.TransitionTo("compensate", "out of stock: "+err.Error())
			case err != nil:
				return ctx.Fail("reserve %s: %v", l.SKU, err)
			}
			o.Undo.Push("release", l.SKU)
			o.Amount += price * l.Quantity
			if i+1 < len(o.Lines) {
				return ctx.UpdateState(o).TransitionTo("reserve", i+1)
			}
			return ctx.UpdateState(o).TransitionTo("check", nil)
		}, compensated...)

	// check: a large order waits for an approval (ApproveOrder,
	// RejectOrder), and is cancelled when none comes in time.
	workflows.Step(Checkouts, "check",
		func(ctx *workflows.StepCtx[Order], o Order, _ any) workflows.StepEffect[Order] {
			if o.Amount > ApprovalAbove {
				return ctx.PauseFor(ApprovalWait, "compensate", "approval timed out")
			}
			return ctx.TransitionTo("charge", nil)
		})

	// charge takes the amount from the customer's account; a charge
	// refused or failing is retried, then the order compensates.
	workflows.Step(Checkouts, "charge",
		func(ctx *workflows.StepCtx[Order], o Order, _ any) workflows.StepEffect[Order] {
			if _, err := Charge.Invoke(ctx.Context(), ctx.Client(), o.Customer, Payment{Order: ctx.WorkflowID(), Amount: o.Amount}); err != nil {
				return ctx.Fail("charge: %v", err)
			}
			o.Outcome, o.Undo = Paid, nil
			return ctx.UpdateState(o).End()
		}, workflows.Retries(2, time.Second, time.Second), workflows.FailoverTo("compensate", "payment failed"))

	// compensate notes why the order is cancelled (the first reason it
	// is given), then runs the undo steps, the last pushed first.
	workflows.Step(Checkouts, "compensate",
		func(ctx *workflows.StepCtx[Order], o Order, reason string) workflows.StepEffect[Order] {
			if o.Outcome == "" {
				o.Outcome = reason
			}
			if next, ok := o.Undo.Pop(); ok {
				o.Undone = append(o.Undone, next.Step+" "+string(next.Input))
				return ctx.UpdateState(o).TransitionTo(next.Step, next.Input)
			}
			return ctx.UpdateState(o).End()
		})

	// release gives back what the order reserved of one SKU.
	workflows.Step(Checkouts, "release",
		func(ctx *workflows.StepCtx[Order], _ Order, sku string) workflows.StepEffect[Order] {
			if _, err := Release.Invoke(ctx.Context(), ctx.Client(), sku, ctx.WorkflowID()); err != nil {
				return ctx.Fail("release %s: %v", sku, err)
			}
			return ctx.TransitionTo("compensate", "")
		})
}

// refused reports whether err is a component's refusal (a 4xx), rather
// than a failure to reach it.
func refused(err error) bool {
	var ce *components.CommandError
	return errors.As(err, &ce)
}
