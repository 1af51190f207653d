package main

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/trellistest"
)

// The commands, one after another on one cart, with no server.
func TestCartCommands(t *testing.T) {
	kit := entities.NewTestKit(Carts, "c-1", nil)
	entities.Exec(kit, AddItem, Line{SKU: "apple", Quantity: 2})
	entities.Exec(kit, AddItem, Line{SKU: "apple", Quantity: 1})
	if got := kit.State().Items["apple"]; got != 3 {
		t.Fatalf("apples = %d, want 3", got)
	}
	if out := entities.Exec(kit, Checkout, components.Done{}); out.Err != nil || !out.Reply.CheckedOut {
		t.Fatalf("checkout: %+v", out)
	}
	out := entities.Exec(kit, AddItem, Line{SKU: "pear", Quantity: 1})
	var refused *components.CommandError
	if !errors.As(out.Err, &refused) || refused.Kind != components.Conflict {
		t.Fatalf("add after checkout: %v, want a conflict", out.Err)
	}
}

// The whole service on a fake clock: an idle cart is abandoned when its
// timer is due, a checked-out one stays.
func TestIdleCartIsAbandoned(t *testing.T) {
	idle := 10 * time.Minute
	ts := trellistest.Start(t, setup(&idle), trellistest.WithServiceOptions(trellis.WithContract(cartapi.Spec)))

	if resp := ts.Post(t, "/carts/c-1/items", map[string]any{"sku": "apple", "quantity": 2}); resp.Status != http.StatusOK {
		t.Fatalf("add: %d %s", resp.Status, resp.Body)
	}
	ts.Post(t, "/carts/c-2/items", map[string]any{"sku": "pear", "quantity": 1})
	if resp := ts.Post(t, "/carts/c-2/checkout", nil); resp.Status != http.StatusOK {
		t.Fatalf("checkout: %d %s", resp.Status, resp.Body)
	}
	if p := ts.Post(t, "/carts/c-2/checkout", nil).Problem(t); p.Status != http.StatusConflict {
		t.Fatalf("second checkout: %+v, want 409", p)
	}
	if p := ts.Post(t, "/carts/c-1/items", map[string]any{"sku": "apple"}).Problem(t); p.Status != http.StatusBadRequest || p.Errors[0].Field != "quantity" {
		t.Fatalf("add without a quantity: %+v, want 400 naming quantity", p)
	}

	ts.AdvanceTimers(t, idle-time.Millisecond)
	if resp := ts.Get(t, "/carts/c-1"); resp.Status != http.StatusOK {
		t.Fatalf("before its idle time: %d %s", resp.Status, resp.Body)
	}
	ts.AdvanceTimers(t, time.Millisecond)
	if p := ts.Get(t, "/carts/c-1").Problem(t); p.Status != http.StatusNotFound {
		t.Fatalf("after its idle time: %+v, want 404", p)
	}
	if resp := ts.Get(t, "/carts/c-2"); resp.Status != http.StatusOK {
		t.Fatalf("the checked-out cart: %d %s", resp.Status, resp.Body)
	}
	if resp := ts.Get(t, "/openapi.yaml"); string(resp.Body) != string(cartapi.Spec) {
		t.Fatal("GET /openapi.yaml does not serve the carts' contract")
	}
}
