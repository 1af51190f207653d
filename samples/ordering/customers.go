package ordering

import (
	"errors"
	"net/http"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/views"
)

// CustomerOrder is a row of the orders-by-customer view: an order placed
// with a customer, and its status.
type CustomerOrder struct {
	Order
	Status string `json:"status"` // placed or confirmed
}

// CustomerOrders is the view of the orders placed with a customer: a row
// per such order while it is placed (a cancelled or expired order has
// none).
var CustomerOrders = views.Define("orders-by-customer", Orders, func(c views.Change[Order]) views.Update[CustomerOrder] {
	o := c.State
	if c.Deleted || !o.Placed || o.Customer == "" {
		return views.Delete[CustomerOrder]()
	}
	status := "placed"
	if o.Confirmed {
		status = "confirmed"
	}
	return views.Upsert(CustomerOrder{Order: o, Status: status})
})

// ByCustomerStatus lists a customer's orders of one status, newest first.
var ByCustomerStatus = CustomerOrders.Query("by-customer-status",
	views.Eq("customer", "status"), views.SortBy("placedAt", views.Desc))

// ServeViews turns on GET /customers/{customer}/orders and its stream,
// which read the CustomerOrders view on r (start it there first), and the
// Trellis-Change-Position of a placing; clock dates the orders placed.
func (e *Endpoint) ServeViews(r *views.Runner, clock clockwork.Clock) { e.views, e.clock = r, clock }

// ListCustomerOrders handles GET /customers/{customer}/orders.
func (e *Endpoint) ListCustomerOrders(w http.ResponseWriter, r *http.Request, customer string, params contract.ListCustomerOrdersParams) {
	status, ok := e.orderStatus(w, r, params.Status)
	if !ok {
		return
	}
	page, err := ByCustomerStatus.Page(r.Context(), e.views, views.Request{
		Params: map[string]string{"customer": customer, "status": string(status)},
		Limit:  params.Limit, Token: params.PageToken, After: params.After,
	})
	switch {
	case errors.Is(err, views.ErrNotStarted):
		api.WriteProblem(w, r, http.StatusServiceUnavailable, "the customers' order lists are off: the store keeps no change log")
		return
	case err != nil:
		api.WriteError(w, r, pageTokenParam(err))
		return
	}
	out := contract.OrderPage{Orders: make([]contract.Order, len(page.Rows)), Next: page.Next}
	for i, row := range page.Rows {
		out.Orders[i] = toAPI(row.Order)
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// FollowCustomerOrders handles GET /customers/{customer}/orders/stream:
// the list ListCustomerOrders pages through, followed live as Server-Sent
// Events (views.Runner.ServeStream).
func (e *Endpoint) FollowCustomerOrders(w http.ResponseWriter, r *http.Request, customer string, params contract.FollowCustomerOrdersParams) {
	status, ok := e.orderStatus(w, r, params.Status)
	if !ok {
		return
	}
	ByCustomerStatus.ServeStream(w, r, e.views, views.Request{
		Params: map[string]string{"customer": customer, "status": string(status)},
	})
}

// orderStatus is the status a list asks for (placed when absent); ok is
// false when the lists are off or status is not one, and the request was
// answered.
func (e *Endpoint) orderStatus(w http.ResponseWriter, r *http.Request, status contract.OrderStatus) (contract.OrderStatus, bool) {
	switch {
	case e.views == nil:
		api.WriteProblem(w, r, http.StatusServiceUnavailable, "the customers' order lists are off: the store keeps no change log")
		return "", false
	case status == "":
		return contract.Placed, true
	case !status.Valid():
		api.WriteError(w, r, api.InvalidField("status", "must be placed or confirmed"))
		return "", false
	}
	return status, true
}

// setPosition sets the Trellis-Change-Position header of a reply to a
// write of order id, when the views are served.
func (e *Endpoint) setPosition(w http.ResponseWriter, r *http.Request, id string) {
	if e.views == nil {
		return
	}
	if pos, err := e.views.Written(r.Context(), Orders.ComponentID(), id); err == nil {
		w.Header().Set("Trellis-Change-Position", pos.String())
	}
}

// pageTokenParam names the page token as the contract does: the view
// calls it token.
func pageTokenParam(err error) error {
	var re *api.RequestError
	if errors.As(err, &re) {
		for i := range re.Fields {
			if re.Fields[i].Field == "token" {
				re.Fields[i].Field = "pageToken"
			}
		}
	}
	return err
}
