package main

import (
	"net/http"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/views"
)

// PlaceOrder handles POST /orders/{id}: starts the order of checked-out
// cart id (201); the order then runs on its own (GetOrder).
func (e *endpoint) PlaceOrder(w http.ResponseWriter, r *http.Request, id string) {
	var body cartapi.PlaceOrder
	if err := api.Decode(r, &body); err != nil {
		api.WriteError(w, r, err)
		return
	}
	row, err := PlaceOrder.Invoke(r.Context(), e.client, id, Order{Customer: body.Customer, PlacedAt: e.now()})
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusCreated, toAPI(row))
}

// GetOrder handles GET /orders/{id}.
func (e *endpoint) GetOrder(w http.ResponseWriter, r *http.Request, id string) {
	row, err := GetOrder.Invoke(r.Context(), e.client, id, components.Done{})
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, toAPI(row))
}

// ApproveOrder handles POST /orders/{id}/approve.
func (e *endpoint) ApproveOrder(w http.ResponseWriter, r *http.Request, id string) {
	e.decide(w, r, ApproveOrder, id)
}

// RejectOrder handles POST /orders/{id}/reject.
func (e *endpoint) RejectOrder(w http.ResponseWriter, r *http.Request, id string) {
	e.decide(w, r, RejectOrder, id)
}

// decide answers an order that waits for an approval with cmd: 204, or
// 409 when it waits for none.
func (e *endpoint) decide(w http.ResponseWriter, r *http.Request, cmd components.EntityMethod[components.Done, components.Done], id string) {
	if _, err := cmd.Invoke(r.Context(), e.client, id, components.Done{}); err != nil {
		api.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ListOrders handles GET /orders?status=: the orders of a status, oldest
// first, a page at a time.
func (e *endpoint) ListOrders(w http.ResponseWriter, r *http.Request, params cartapi.ListOrdersParams) {
	if !params.Status.Valid() {
		api.WriteError(w, r, api.InvalidField("status", "must be one of the order statuses"))
		return
	}
	e.page(w, r, ByStatus, views.Request{Params: map[string]string{"status": string(params.Status)}, Limit: params.Limit, Token: params.Token})
}

// ListCustomerOrders handles GET /customers/{customer}/orders: a
// customer's orders, newest first, a page at a time.
func (e *endpoint) ListCustomerOrders(w http.ResponseWriter, r *http.Request, customer string, params cartapi.ListCustomerOrdersParams) {
	e.page(w, r, ByCustomer, views.Request{Params: map[string]string{"customer": customer}, Limit: params.Limit, Token: params.Token})
}

// FollowCustomerOrders handles GET /customers/{customer}/orders/stream:
// the orders ListCustomerOrders pages through, followed live as
// Server-Sent Events (the stream reads Last-Event-ID itself).
func (e *endpoint) FollowCustomerOrders(w http.ResponseWriter, r *http.Request, customer string, _ cartapi.FollowCustomerOrdersParams) {
	ByCustomer.ServeStream(w, r, e.views, views.Request{Params: map[string]string{"customer": customer}})
}

// page answers with one page of q; a bad limit or token is a 400 naming it.
func (e *endpoint) page(w http.ResponseWriter, r *http.Request, q *views.Query[OrderRow], req views.Request) {
	page, err := q.Page(r.Context(), e.views, req)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	out := cartapi.OrderPage{Orders: make([]cartapi.Order, len(page.Rows)), Next: page.Next}
	for i, row := range page.Rows {
		out.Orders[i] = toAPI(row)
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// toAPI is an order as the contract has it.
func toAPI(o OrderRow) cartapi.Order {
	return cartapi.Order{Id: o.ID, Customer: o.Customer, Status: cartapi.OrderStatus(o.Status),
		Amount: o.Amount, Outcome: o.Outcome, PlacedAt: o.PlacedAt}
}
