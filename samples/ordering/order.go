package ordering

import (
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Order is the state of one order entity. The empty state (never placed,
// or cancelled) has Placed false.
type Order struct {
	ID        string `json:"id"`
	Confirmed bool   `json:"confirmed"`
	Placed    bool   `json:"placed"`
	Item      string `json:"item"`
	Quantity  int    `json:"quantity"`
}

// OrderRequest is what placing an order takes.
type OrderRequest struct {
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// Outcome is a business result of confirm and cancel. They are replies,
// not errors, so that the timer that cancels an order is never retried for
// a business reason.
type Outcome string

// The outcomes.
const (
	OK       Outcome = "ok"
	NotFound Outcome = "not-found"
	Invalid  Outcome = "invalid"
)

// Result is the reply of confirm and cancel.
type Result struct {
	Outcome Outcome `json:"outcome"`
	Message string  `json:"message,omitempty"`
	Order   Order   `json:"order"`
}

// Orders is the order entity, component id "order".
var Orders = entities.Define("order", func(id string) Order { return Order{ID: id} })

// PlaceOrder places the order and replies with it.
var PlaceOrder = entities.Command(Orders, "placeOrder",
	func(ctx *entities.Ctx[Order, Order], _ Order, req OrderRequest) entities.Effect[Order, Order] {
		o := Order{ID: ctx.EntityID(), Placed: true, Item: req.Item, Quantity: req.Quantity}
		return ctx.UpdateState(o).ThenReply(o)
	})

// Confirm confirms a placed order (again: it is idempotent); an order that
// is not placed is NotFound.
var Confirm = entities.Command(Orders, "confirm",
	func(ctx *entities.Ctx[Order, Result], o Order, _ components.Done) entities.Effect[Order, Result] {
		if !o.Placed {
			return ctx.Reply(Result{Outcome: NotFound, Message: "No order found for " + ctx.EntityID(), Order: o})
		}
		o.Confirmed = true
		return ctx.UpdateState(o).ThenReply(Result{Outcome: OK, Order: o})
	})

// Cancel removes a placed, unconfirmed order; a confirmed one is Invalid and
// one that is not placed is NotFound. It never fails for a business reason.
var Cancel = entities.Command(Orders, "cancel",
	func(ctx *entities.Ctx[Order, Result], o Order, _ components.Done) entities.Effect[Order, Result] {
		switch {
		case !o.Placed:
			return ctx.Reply(Result{Outcome: NotFound, Message: "No order found for " + ctx.EntityID(), Order: o})
		case o.Confirmed:
			return ctx.Reply(Result{Outcome: Invalid, Message: "Cannot cancel an already confirmed order", Order: o})
		}
		return ctx.DeleteEntity().ThenReply(Result{Outcome: OK, Order: Order{ID: ctx.EntityID()}})
	})

// Status replies with a placed order; an order that is not placed is the
// error "No order found for '<id>'".
var Status = entities.Command(Orders, "status",
	func(ctx *entities.Ctx[Order, Order], o Order, _ components.Done) entities.Effect[Order, Order] {
		if !o.Placed {
			return ctx.Error("No order found for '%s'", ctx.EntityID())
		}
		return ctx.Reply(o)
	})
