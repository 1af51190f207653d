package ordering

import (
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Order is the state of one order entity. The empty state (never placed,
// or cancelled) has Placed false. Expired marks an order whose timer fired
// before it was placed: see [Expire].
type Order struct {
	ID        string `json:"id"`
	Confirmed bool   `json:"confirmed"`
	Placed    bool   `json:"placed"`
	Item      string `json:"item"`
	Quantity  int    `json:"quantity"`
	Expired   bool   `json:"expired,omitempty"`
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

// PlaceOrder places the order and replies with it. An order its timer has
// already expired (see [Expire]) is placed and expired at once, as it would
// have been had it been stored a moment sooner: the mark is removed,
// nothing is stored, and the reply is the order as placed.
var PlaceOrder = entities.Command(Orders, "placeOrder",
	func(ctx *entities.Ctx[Order, Order], current Order, req OrderRequest) entities.Effect[Order, Order] {
		o := Order{ID: ctx.EntityID(), Placed: true, Item: req.Item, Quantity: req.Quantity}
		if current.Expired {
			return ctx.DeleteEntity().ThenReply(o)
		}
		return ctx.UpdateState(o).ThenReply(o)
	})

// Confirm confirms a placed order (again: it is idempotent); an order that
// is not placed is NotFound.
var Confirm = entities.Command(Orders, "confirm",
	func(ctx *entities.Ctx[Order, Result], o Order, _ components.Done) entities.Effect[Order, Result] {
		if !o.Placed {
			return ctx.Reply(notPlaced(ctx.EntityID()))
		}
		o.Confirmed = true
		return ctx.UpdateState(o).ThenReply(Result{Outcome: OK, Order: o})
	})

// Cancel removes a placed, unconfirmed order; a confirmed one is Invalid and
// one that is not placed is NotFound. It never fails for a business reason.
var Cancel = entities.Command(Orders, "cancel", cancel)

func cancel(ctx *entities.Ctx[Order, Result], o Order, _ components.Done) entities.Effect[Order, Result] {
	switch {
	case !o.Placed:
		return ctx.Reply(notPlaced(ctx.EntityID()))
	case o.Confirmed:
		return ctx.Reply(Result{Outcome: Invalid, Message: "Cannot cancel an already confirmed order", Order: o})
	}
	return ctx.DeleteEntity().ThenReply(Result{Outcome: OK, Order: Order{ID: ctx.EntityID()}})
}

// notPlaced is the result of confirm, cancel and expire on an order that is
// not placed.
func notPlaced(id string) Result {
	return Result{Outcome: NotFound, Message: "No order found for " + id, Order: Order{ID: id}}
}

// Expire is what the order's timer runs: it cancels a placed, unconfirmed
// order as Cancel does (a confirmed one is Invalid and stays). An order not
// placed yet is marked Expired, and the outcome is NotFound: the timer is
// created before the order is stored, and with a short expiry or a slow
// store it can fire first. The entity runs its commands one at a time
// (across instances too: its writes are compare-and-set), so the placement
// that comes after finds the mark and stores nothing; without it, it would
// store an order whose timer is gone. A mark outlives its order only when
// no placement follows (the placement failed, a cancelled order's timer
// could not be deleted, or a timer ran twice after a lost lease): one small
// record each, never a placed order.
var Expire = entities.Command(Orders, "expire",
	func(ctx *entities.Ctx[Order, Result], o Order, done components.Done) entities.Effect[Order, Result] {
		if !o.Placed && !o.Expired {
			return ctx.UpdateState(Order{ID: ctx.EntityID(), Expired: true}).ThenReply(notPlaced(ctx.EntityID()))
		}
		return cancel(ctx, o, done)
	})

// Status replies with a placed order; an order that is not placed is
// refused as NotFound: "No order found for '<id>'".
var Status = entities.Command(Orders, "status",
	func(ctx *entities.Ctx[Order, Order], o Order, _ components.Done) entities.Effect[Order, Order] {
		if !o.Placed {
			return ctx.NotFound("No order found for '%s'", ctx.EntityID())
		}
		return ctx.Reply(o)
	})
