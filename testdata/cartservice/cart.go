package main

import (
	"maps"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/timedactions"
)

// Cart is the state of one shopping cart.
type Cart struct {
	ID         string         `json:"id"`
	Items      map[string]int `json:"items"` // quantities by SKU
	CheckedOut bool           `json:"checkedOut"`
}

// Line is what AddItem adds to a cart.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// Carts is the cart entity: one per cart id, its commands run one at a time.
var Carts = entities.Define("cart", func(id string) Cart { return Cart{ID: id} })

// AddItem adds a line; a checked-out cart refuses it (409).
var AddItem = entities.Command(Carts, "addItem",
	func(ctx *entities.Ctx[Cart, Cart], c Cart, l Line) entities.Effect[Cart, Cart] {
		if c.CheckedOut {
			return ctx.Conflict("cart %s is checked out", c.ID)
		}
		c.Items = maps.Clone(c.Items) // a handler never changes its state in place
		if c.Items == nil {
			c.Items = map[string]int{}
		}
		c.Items[l.SKU] += l.Quantity
		return ctx.UpdateState(c).ThenReply(c)
	})

// GetCart replies with the cart; an empty one does not exist (404).
var GetCart = entities.Command(Carts, "get",
	func(ctx *entities.Ctx[Cart, Cart], c Cart, _ components.Done) entities.Effect[Cart, Cart] {
		if len(c.Items) == 0 {
			return ctx.NotFound("no cart %s", c.ID)
		}
		return ctx.Reply(c)
	})

// Checkout checks the cart out, once (409 the second time).
var Checkout = entities.Command(Carts, "checkout",
	func(ctx *entities.Ctx[Cart, Cart], c Cart, _ components.Done) entities.Effect[Cart, Cart] {
		switch {
		case len(c.Items) == 0:
			return ctx.NotFound("no cart %s", c.ID)
		case c.CheckedOut:
			return ctx.Conflict("cart %s is checked out already", c.ID)
		}
		c.CheckedOut = true
		return ctx.UpdateState(c).ThenReply(c)
	})

// Abandon deletes a cart that is not checked out.
var Abandon = entities.Command(Carts, "abandon",
	func(ctx *entities.Ctx[Cart, components.Done], c Cart, _ components.Done) entities.Effect[Cart, components.Done] {
		if c.CheckedOut {
			return ctx.Reply(components.Done{})
		}
		return ctx.DeleteEntity().ThenReply(components.Done{})
	})

// Idle is the timed action that the idle timers of carts call.
var Idle = timedactions.Define("cart-idle")

// AbandonIdle abandons the cart whose idle timer fired; a failure to reach
// it is an error, and the timer tries again.
var AbandonIdle = timedactions.Method(Idle, "abandon",
	func(ctx *timedactions.Ctx, cartID string) timedactions.Effect {
		if _, err := Abandon.Invoke(ctx.Context(), ctx.Client(), cartID, components.Done{}); err != nil {
			return ctx.Error("abandon cart %s: %v", cartID, err)
		}
		return ctx.Done()
	})

// idleTimer names the idle timer of a cart.
func idleTimer(cartID string) string { return "cart-idle-" + cartID }
