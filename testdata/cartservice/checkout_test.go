package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// shelf is a SKU's stock before an order: its units and unit price.
type shelf struct{ units, price int }

// orderCase is one order of TestCheckout: the stock, the account and the
// cart before, what the test does while the order waits for an approval,
// and how it ends.
type orderCase struct {
	name     string
	stock    map[string]shelf // by SKU, the case's name prefixed
	cart     map[string]int
	funds    int
	open     bool                                                   // the cart is not checked out
	decide   func(t *testing.T, ts *trellistest.Service, id string) // nil: it waits for none
	status   cartapi.OrderStatus
	outcome  string         // its prefix
	amount   int            // what the reserved lines cost
	released []string       // the SKUs the compensation released, in order
	left     map[string]int // units available after, by SKU
	balance  int            // the account's after
}

// answer approves or rejects (how) order id over HTTP.
func answer(how string) func(t *testing.T, ts *trellistest.Service, id string) {
	return func(t *testing.T, ts *trellistest.Service, id string) {
		post(t, ts, "/orders/"+id+"/"+how, nil, http.StatusNoContent)
	}
}

// lapse lets order id's wait for an approval lapse on the fake clock.
func lapse(t *testing.T, ts *trellistest.Service, _ string) { ts.AdvanceTimers(t, ApprovalWait) }

var orderCases = []orderCase{
	{name: "paid", stock: map[string]shelf{"apple": {10, 200}, "pear": {5, 300}}, cart: map[string]int{"apple": 2, "pear": 1},
		funds: 1000, status: cartapi.Paid, outcome: Paid, amount: 700, left: map[string]int{"apple": 8, "pear": 4}, balance: 300},
	{name: "out-of-stock", stock: map[string]shelf{"apple": {10, 200}, "pear": {1, 300}}, cart: map[string]int{"apple": 2, "pear": 3},
		funds: 1000, status: cartapi.Cancelled, outcome: "out of stock: 3 of out-of-stock-pear wanted, 1 available", amount: 400,
		released: []string{"apple"}, left: map[string]int{"apple": 10, "pear": 1}, balance: 1000},
	{name: "payment-failed", stock: map[string]shelf{"apple": {10, 200}, "pear": {5, 300}}, cart: map[string]int{"apple": 2, "pear": 1},
		funds: 100, status: cartapi.Cancelled, outcome: "payment failed", amount: 700,
		released: []string{"pear", "apple"}, left: map[string]int{"apple": 10, "pear": 5}, balance: 100},
	{name: "approved", stock: map[string]shelf{"apple": {100, 200}}, cart: map[string]int{"apple": 60}, funds: 20000,
		decide: answer("approve"), status: cartapi.Paid, outcome: Paid, amount: 12000, left: map[string]int{"apple": 40}, balance: 8000},
	{name: "rejected", stock: map[string]shelf{"apple": {100, 200}}, cart: map[string]int{"apple": 60}, funds: 20000,
		decide: answer("reject"), status: cartapi.Cancelled, outcome: "rejected", amount: 12000,
		released: []string{"apple"}, left: map[string]int{"apple": 100}, balance: 20000},
	{name: "approval-timed-out", stock: map[string]shelf{"apple": {100, 200}}, cart: map[string]int{"apple": 60}, funds: 20000,
		decide: lapse, status: cartapi.Cancelled, outcome: "approval timed out", amount: 12000,
		released: []string{"apple"}, left: map[string]int{"apple": 100}, balance: 20000},
	{name: "not-checked-out", stock: map[string]shelf{"apple": {10, 200}}, cart: map[string]int{"apple": 1}, open: true, funds: 1000,
		status: cartapi.Cancelled, outcome: "cart not-checked-out is not checked out", left: map[string]int{"apple": 10}, balance: 1000},
}

// TestCheckout runs each order over HTTP, as a client does: the stock
// and the account funded, the cart filled and checked out, the order
// placed, approved or not; then its outcome, what is left in stock and
// in the account.
func TestCheckout(t *testing.T) {
	ts := start(t)
	for _, oc := range orderCases {
		t.Run(oc.name, func(t *testing.T) { runOrder(t, ts, oc) })
	}
}

// runOrder runs one order case.
func runOrder(t *testing.T, ts *trellistest.Service, oc orderCase) {
	id, customer := oc.name, oc.name+"-customer"
	cart := map[string]int{}
	for sku, n := range oc.cart {
		cart[id+"-"+sku] = n
	}
	for sku, s := range oc.stock {
		post(t, ts, "/stock/"+id+"-"+sku, map[string]any{"quantity": s.units, "price": s.price}, http.StatusOK)
	}
	post(t, ts, "/accounts/"+customer+"/deposit", map[string]any{"amount": oc.funds}, http.StatusOK)
	if oc.open {
		post(t, ts, "/carts/"+id+"/items", map[string]any{"sku": id + "-apple", "quantity": 1}, http.StatusOK)
	} else {
		checkedOut(t, ts, id, cart)
	}
	var placed cartapi.Order
	post(t, ts, "/orders/"+id, map[string]any{"customer": customer}, http.StatusCreated).JSON(t, &placed)
	if placed.Status != cartapi.Placed || !placed.PlacedAt.Equal(ts.Clock.Now()) {
		t.Errorf("placed: %+v, want placed at %v", placed, ts.Clock.Now())
	}
	if oc.decide != nil {
		waitApproval(t, ts, id)
		oc.decide(t, ts, id)
	}
	in := settle(t, ts, id)
	var got cartapi.Order
	if resp := ts.Get(t, "/orders/"+id); resp.Status != http.StatusOK {
		t.Fatalf("GET /orders/%s: %d %s", id, resp.Status, resp.Body)
	} else {
		resp.JSON(t, &got)
	}
	var released []string
	for _, u := range in.State.Undone {
		released = append(released, strings.TrimPrefix(strings.Trim(strings.TrimPrefix(u, "release "), `"`), id+"-"))
	}
	if got.Status != oc.status || !strings.HasPrefix(got.Outcome, oc.outcome) || got.Amount != oc.amount || !slices.Equal(released, oc.released) {
		t.Errorf("order %s: %+v, released %v (%v), want %s %q of %d, released %v", id, got, released, in.State.Undone, oc.status, oc.outcome, oc.amount, oc.released)
	}
	for sku, want := range oc.left {
		var s cartapi.Stock
		ts.Get(t, "/stock/"+id+"-"+sku).JSON(t, &s)
		if s.Available != want {
			t.Errorf("stock of %s: %d available, want %d", sku, s.Available, want)
		}
	}
	if a, err := GetAccount.Invoke(context.Background(), ts.Client, customer, components.Done{}); err != nil || a.Balance != oc.balance {
		t.Errorf("account of %s: %+v (%v), want a balance of %d", customer, a, err, oc.balance)
	}
}

// waitApproval waits until order id waits for an approval, its timeout's
// timer armed (so that the fake clock can make it lapse).
func waitApproval(t testing.TB, ts *trellistest.Service, id string) {
	t.Helper()
	trellistest.WaitWorkflow(t, checkouts(t, ts), id, 10*time.Second, workflows.StatusPaused)
	trellistest.Eventually(t, 10*time.Second, "the approval timer of "+id+" is armed", func() bool {
		_, err := ts.Host().Timers.Get(context.Background(), workflows.TimerName(Checkouts.ComponentID(), id))
		return err == nil
	})
}

// TestOrderRefusals: the order routes refuse what they cannot do, and
// say why.
func TestOrderRefusals(t *testing.T) {
	ts := start(t)
	post(t, ts, "/orders/o-1", map[string]any{"customer": "alice"}, http.StatusCreated)
	settle(t, ts, "o-1") // cancelled: no such cart
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		names              string
	}{
		{"placed twice", "POST", "/orders/o-1", map[string]any{"customer": "alice"}, 409, "placed already"},
		{"no customer", "POST", "/orders/o-2", map[string]any{}, 400, "customer"},
		{"no such order", "GET", "/orders/o-9", nil, 404, "no order o-9"},
		{"approval of one that waits for none", "POST", "/orders/o-1/approve", nil, 409, "waits for no approval"},
		{"an unknown status", "GET", "/orders?status=lost", nil, 400, "status"},
		{"a bad page token", "GET", "/orders?status=paid&token=nope", nil, 400, "token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if p := ts.Do(t, c.method, c.path, c.body).Problem(t); p.Status != c.status || !strings.Contains(p.Detail+problemFields(p), c.names) {
				t.Errorf("%s %s: %+v, want %d naming %q", c.method, c.path, p, c.status, c.names)
			}
		})
	}
}
