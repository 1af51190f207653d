package main

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"testing"
	"time"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/trellistest"
)

// crashOutcome is what each crashed run of TestCheckoutCrashes must end
// with: each order's status, outcome and amount, each SKU's units
// available, each account's balance.
type crashOutcome struct {
	Orders    map[string]OrderRow
	Available map[string]int
	Balances  map[string]int
}

// TestCheckoutCrashes crashes the checkout's runner at each of its crash
// points in turn (trellistest.CrashWorkflows) over four orders: one paid,
// one whose charge keeps failing (compensated), one approved and one
// whose approval times out (compensated). Each run ends as the run
// without a crash does, and no reservation, release or charge is applied
// twice.
func TestCheckoutCrashes(t *testing.T) {
	idle := 10 * time.Minute
	points := trellistest.CrashWorkflows(t, setup(&idle), func(t testing.TB, ts *trellistest.Service) crashOutcome {
		post(t, ts, "/stock/apple", map[string]any{"quantity": 200, "price": 200}, http.StatusOK)
		post(t, ts, "/stock/pear", map[string]any{"quantity": 10, "price": 300}, http.StatusOK)
		post(t, ts, "/accounts/alice/deposit", map[string]any{"amount": 50000}, http.StatusOK)
		post(t, ts, "/accounts/bob/deposit", map[string]any{"amount": 100}, http.StatusOK)
		place := func(id, customer string, cart map[string]int) {
			checkedOut(t, ts, id, cart)
			post(t, ts, "/orders/"+id, map[string]any{"customer": customer}, http.StatusCreated)
		}
		place("paid", "alice", map[string]int{"apple": 2, "pear": 1})
		settle(t, ts, "paid")
		place("declined", "bob", map[string]int{"apple": 1, "pear": 1})
		settle(t, ts, "declined")
		place("approved", "alice", map[string]int{"apple": 60})
		place("timed-out", "alice", map[string]int{"apple": 70})
		waitApproval(t, ts, "approved")
		waitApproval(t, ts, "timed-out")
		post(t, ts, "/orders/approved/approve", nil, http.StatusNoContent)
		settle(t, ts, "approved")
		ts.AdvanceTimers(t, ApprovalWait) // every other order has ended: no step runs
		settle(t, ts, "timed-out")

		ctx := context.Background()
		out := crashOutcome{Orders: map[string]OrderRow{}, Available: map[string]int{}, Balances: map[string]int{}}
		for _, id := range []string{"paid", "declined", "approved", "timed-out"} {
			row, err := GetOrder.Invoke(ctx, ts.Client, id, components.Done{})
			if err != nil {
				t.Fatal(err)
			}
			out.Orders[id] = row
		}
		for _, sku := range []string{"apple", "pear"} {
			s, err := GetStock.Invoke(ctx, ts.Client, sku, components.Done{})
			if err != nil {
				t.Fatal(err)
			}
			out.Available[sku] = s.Available
		}
		for _, c := range []string{"alice", "bob"} {
			a, err := GetAccount.Invoke(ctx, ts.Client, c, components.Done{})
			if err != nil {
				t.Fatal(err)
			}
			out.Balances[c] = a.Balance
		}
		// Paid: 2 apples and a pear, then 60 apples; the others released.
		if want := map[string]int{"apple": 138, "pear": 9}; !maps.Equal(out.Available, want) {
			t.Errorf("available: %v, want %v", out.Available, want)
		}
		return out
	}, trellistest.WithServiceOptions(trellis.WithContract(cartapi.Spec)), trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	if len(points) < 30 {
		t.Errorf("the orders passed %d crash points, want every step's two and each pause's: %v", len(points), points)
	}
}
