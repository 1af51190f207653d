package main

import (
	"time"

	"github.com/trellis-go/trellis/views"
	"github.com/trellis-go/trellis/workflows"
)

// OrderRow is an order as the orders view (and GetOrder) shows it.
type OrderRow struct {
	ID       string    `json:"id"`
	Customer string    `json:"customer"`
	Status   string    `json:"status"` // see statusOf
	Amount   int       `json:"amount"`
	Outcome  string    `json:"outcome,omitempty"`
	PlacedAt time.Time `json:"placedAt"`
}

// The statuses of an order.
const (
	StatusPlaced           = "placed"            // its steps run
	StatusAwaitingApproval = "awaiting-approval" // it waits for ApproveOrder
	StatusPaid             = "paid"
	StatusCancelled        = "cancelled" // it ended otherwise (Outcome says why)
	StatusFailed           = "failed"    // a step failed with no way out
)

// rowOf is order id's row, standing at status s.
func rowOf(id string, s workflows.Status, o Order) OrderRow {
	return OrderRow{ID: id, Customer: o.Customer, Status: statusOf(s, o), Amount: o.Amount, Outcome: o.Outcome, PlacedAt: o.PlacedAt}
}

// statusOf is an order's status, from where its workflow stands.
func statusOf(s workflows.Status, o Order) string {
	switch {
	case s == workflows.StatusPaused:
		return StatusAwaitingApproval
	case s == workflows.StatusFailed:
		return StatusFailed
	case s == workflows.StatusEnded && o.Outcome == Paid:
		return StatusPaid
	case s == workflows.StatusEnded:
		return StatusCancelled
	}
	return StatusPlaced
}

// Orders is the view of the orders: a row per placed order, as its
// workflow moves.
var Orders = views.DefineWorkflow("orders", Checkouts,
	func(c views.Change[workflows.Instance[Order]]) views.Update[OrderRow] {
		if c.Deleted || c.State.Status == workflows.StatusNotStarted {
			return views.Delete[OrderRow]()
		}
		return views.Upsert(rowOf(c.EntityID, c.State.Status, c.State.State))
	})

var (
	// ByCustomer lists a customer's orders, newest first.
	ByCustomer = Orders.Query("by-customer", views.Eq("customer"), views.SortBy("placedAt", views.Desc))
	// ByStatus lists the orders of one status, oldest first: the orders
	// awaiting an approval, say.
	ByStatus = Orders.Query("by-status", views.Eq("status"), views.SortBy("placedAt", views.Asc))
)
