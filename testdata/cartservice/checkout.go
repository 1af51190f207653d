package main

import (
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Order is the checkout workflow's state: the order of one checked-out
// cart (the workflow's id is the cart's).
type Order struct {
	Customer string    `json:"customer"`
	PlacedAt time.Time `json:"placedAt"`
	// Lines are the cart's, by SKU; Amount what the reserved ones cost,
	// in cents.
	Lines  []Line `json:"lines,omitempty"`
	Amount int    `json:"amount"`
	// Outcome is "" while the order runs, then "paid", or why it was
	// cancelled ("rejected", "approval timed out", "out of stock: ...",
	// "payment failed", "cart c-1 is not checked out").
	Outcome string `json:"outcome,omitempty"`
	// Undo is what to release if the order cannot go on; Undone, the
	// undo steps a compensation ran, in order.
	Undo   workflows.Undo `json:"undo,omitempty"`
	Undone []string       `json:"undone,omitempty"`
}

// Settings of the checkout.
const (
	// ApprovalAbove is the amount (cents) above which an order waits for
	// an approval.
	ApprovalAbove = 100_00
	// ApprovalWait is how long it waits before it is cancelled.
	ApprovalWait = 24 * time.Hour
	// Paid is the outcome of an order that went through.
	Paid = "paid"
)

// Checkouts is the checkout workflow, one per checked-out cart.
var Checkouts = workflows.Define("checkout", func(string) Order { return Order{} })

var (
	// PlaceOrder starts the order of a cart, once (409 the second time).
	PlaceOrder = workflows.Command(Checkouts, "place",
		func(ctx *workflows.Ctx[Order, OrderRow], _ Order, o Order) workflows.Effect[Order, OrderRow] {
			switch {
			case ctx.Status() != workflows.StatusNotStarted:
				return ctx.Conflict("order %s is placed already", ctx.WorkflowID())
			case o.Customer == "":
				return ctx.Invalid("an order needs a customer")
			}
			o = Order{Customer: o.Customer, PlacedAt: o.PlacedAt}
			return ctx.UpdateState(o).TransitionTo("load", nil).ThenReply(rowOf(ctx.WorkflowID(), workflows.StatusRunning, o))
		})
	// ApproveOrder lets an order that waits for an approval go on.
	ApproveOrder = workflows.Command(Checkouts, "approve",
		func(ctx *workflows.Ctx[Order, components.Done], _ Order, _ components.Done) workflows.Effect[Order, components.Done] {
			if ctx.Status() != workflows.StatusPaused {
				return ctx.Conflict("order %s waits for no approval", ctx.WorkflowID())
			}
			return ctx.TransitionTo("charge", nil).ThenReply(components.Done{})
		})
	// RejectOrder cancels an order that waits for an approval: what it
	// reserved is released.
	RejectOrder = workflows.Command(Checkouts, "reject",
		func(ctx *workflows.Ctx[Order, components.Done], _ Order, _ components.Done) workflows.Effect[Order, components.Done] {
			if ctx.Status() != workflows.StatusPaused {
				return ctx.Conflict("order %s waits for no approval", ctx.WorkflowID())
			}
			return ctx.TransitionTo("compensate", "rejected").ThenReply(components.Done{})
		})
	// GetOrder reads an order as its row in the orders view shows it.
	GetOrder = workflows.Command(Checkouts, "get",
		func(ctx *workflows.Ctx[Order, OrderRow], o Order, _ components.Done) workflows.Effect[Order, OrderRow] {
			if ctx.Status() == workflows.StatusNotStarted {
				return ctx.NotFound("no order %s", ctx.WorkflowID())
			}
			return ctx.Reply(rowOf(ctx.WorkflowID(), ctx.Status(), o))
		})
)
