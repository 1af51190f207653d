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
	// Customer is who placed it, if the request said; PlacedAt when, in
	// Unix milliseconds (0 for an order placed before it was kept).
	Customer string `json:"customer,omitempty"`
	PlacedAt int64  `json:"placedAt,omitempty"`
}

// OrderRequest is what placing an order takes.
type OrderRequest struct {
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
	Customer string `json:"customer,omitempty"`
	// PlacedAt is when the endpoint took the order, in Unix milliseconds.
	PlacedAt int64 `json:"placedAt,omitempty"`
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

// PlaceOrder places the order and replies with it; an order placed
// already is left as it is and is the reply (a retry with the same
// Idempotency-Key, whose id is the same: placing is idempotent). An
// Expired mark, which the versions before this one wrote when the timer
// fired first, is removed: such an order was expired before it was
// placed, and the reply is the order as placed.
var PlaceOrder = entities.Command(Orders, "placeOrder",
	func(ctx *entities.Ctx[Order, Order], current Order, req OrderRequest) entities.Effect[Order, Order] {
		o := Order{ID: ctx.EntityID(), Placed: true, Item: req.Item, Quantity: req.Quantity, Customer: req.Customer, PlacedAt: req.PlacedAt}
		switch {
		case current.Expired:
			return ctx.DeleteEntity().ThenReply(o)
		case current.Placed:
			return ctx.Reply(current)
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
// order as Cancel does (a confirmed one is Invalid and stays). An order
// not placed (yet) is NotFound, and nothing is written: the timer is
// created before the order is stored, and with a short expiry, a slow
// store or a placement whose outcome was unknown, it can fire first;
// ExpireOrder then fails the firing, so that the timer tries again a
// while later, and gives up once no placement can still be on its way.
var Expire = entities.Command(Orders, "expire", cancel)

// Status replies with a placed order; an order that is not placed is
// refused as NotFound: "No order found for '<id>'".
var Status = entities.Command(Orders, "status",
	func(ctx *entities.Ctx[Order, Order], o Order, _ components.Done) entities.Effect[Order, Order] {
		if !o.Placed {
			return ctx.NotFound("No order found for '%s'", ctx.EntityID())
		}
		return ctx.Reply(o)
	})
