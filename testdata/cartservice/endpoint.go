package main

import (
	"net/http"
	"time"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/timers"
)

// endpoint serves the routes of the carts' contract (cartapi.ServerInterface).
type endpoint struct {
	client *components.Client
	timers *timers.Scheduler
	idle   time.Duration // how long a cart may stay idle
}

// GetCart handles GET /carts/{id}.
func (e *endpoint) GetCart(w http.ResponseWriter, r *http.Request, id string) {
	c, err := GetCart.Invoke(r.Context(), e.client, id, components.Done{})
	reply(w, r, c, err)
}

// AddItem handles POST /carts/{id}/items, and starts the cart's idle timer
// afresh: a cart is abandoned once it has been idle since its last add.
func (e *endpoint) AddItem(w http.ResponseWriter, r *http.Request, id string) {
	var body cartapi.Item
	if err := api.Decode(r, &body); err != nil {
		api.WriteError(w, r, err) // 400 naming the field
		return
	}
	c, err := AddItem.Invoke(r.Context(), e.client, id, Line{SKU: body.Sku, Quantity: body.Quantity})
	if err == nil {
		var call components.DeferredCall
		if call, err = AbandonIdle.Deferred(id); err == nil {
			_, err = e.timers.Create(r.Context(), idleTimer(id), e.idle, call)
		}
	}
	reply(w, r, c, err)
}

// Checkout handles POST /carts/{id}/checkout; a checked-out cart needs no
// idle timer.
func (e *endpoint) Checkout(w http.ResponseWriter, r *http.Request, id string) {
	c, err := Checkout.Invoke(r.Context(), e.client, id, components.Done{})
	if err == nil {
		err = e.timers.Delete(r.Context(), idleTimer(id))
	}
	reply(w, r, c, err)
}

// reply answers with the cart, or with the problem err stands for:
// ctx.NotFound is a 404, ctx.Conflict a 409, a timeout a 504.
func reply(w http.ResponseWriter, r *http.Request, c Cart, err error) {
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, cartapi.Cart{Id: c.ID, Items: c.Items, CheckedOut: c.CheckedOut})
}
