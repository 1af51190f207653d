package ordering_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/samples/ordering"
)

var done = components.Done{}

// The order entity's commands, one at a time against a given state, as the
// reference sample specifies them.
func TestOrderCommands(t *testing.T) {
	placed := ordering.Order{ID: "o1", Placed: true, Item: "Pizza", Quantity: 2}
	confirmed := placed
	confirmed.Confirmed = true
	empty := ordering.Order{ID: "o1"}

	place := entities.Try(ordering.Orders, ordering.PlaceOrder, "o1", empty, ordering.OrderRequest{Item: "Pizza", Quantity: 2}, nil)
	if !place.Updated || place.State != placed || place.Reply != placed {
		t.Errorf("placeOrder: %+v", place)
	}

	tests := []struct {
		name        string                                                    // the case
		cmd         components.EntityMethod[components.Done, ordering.Result] // confirm or cancel
		state       ordering.Order                                            // the state before
		wantOutcome ordering.Outcome                                          // the business result
		wantMessage string                                                    // its message
		wantState   ordering.Order                                            // the state after
		wantDeleted bool                                                      // the entity was deleted
	}{
		{"confirm placed", ordering.Confirm, placed, ordering.OK, "", confirmed, false},
		{"confirm twice", ordering.Confirm, confirmed, ordering.OK, "", confirmed, false},
		{"confirm not placed", ordering.Confirm, empty, ordering.NotFound, "No order found for o1", empty, false},
		{"cancel placed", ordering.Cancel, placed, ordering.OK, "", empty, true},
		{"cancel confirmed", ordering.Cancel, confirmed, ordering.Invalid, "Cannot cancel an already confirmed order", confirmed, false},
		{"cancel not placed", ordering.Cancel, empty, ordering.NotFound, "No order found for o1", empty, false},
	}
	for _, tc := range tests {
		out := entities.Try(ordering.Orders, tc.cmd, "o1", tc.state, done, nil)
		if out.Err != nil || out.Reply.Outcome != tc.wantOutcome || out.Reply.Message != tc.wantMessage ||
			out.State != tc.wantState || out.Deleted != tc.wantDeleted {
			t.Errorf("%s: %+v", tc.name, out)
		}
	}

	status := entities.Try(ordering.Orders, ordering.Status, "o1", empty, done, nil)
	if msg, ok := components.IsCommandError(status.Err); !ok || msg != "No order found for 'o1'" {
		t.Errorf("status of an order not placed: %+v", status)
	}
	if s := entities.Try(ordering.Orders, ordering.Status, "o1", placed, done, nil); s.Err != nil || s.Reply != placed {
		t.Errorf("status of a placed order: %+v", s)
	}
}

// expireOrder is done for every business result of cancel, and fails only
// when the order cannot be reached.
func TestExpireOrder(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	if _, err := ordering.TimedAction.Start(client); err != nil {
		t.Fatal(err)
	}
	// No order entity is running: cancel cannot be reached, so the timer must retry.
	err := ordering.ExpireOrder.Invoke(context.Background(), client, "o-unreachable")
	if err == nil {
		t.Fatal("expireOrder succeeded although the order entity is not running")
	}
	if _, isBusiness := components.IsCommandError(err); !isBusiness {
		t.Fatalf("expected the timed action's error effect, got %v", err)
	}
}

// With the order running, expireOrder is done for a placed order (which it
// cancels), a confirmed one (which stays) and a missing one.
func TestExpireOrderOutcomes(t *testing.T) {
	sys := runtime.NewSystem(t.Name(), runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer func() { _ = sys.Shutdown(context.Background()) }()
	client := components.NewClient(components.NewRegistry())
	if _, err := ordering.Orders.Start(entities.Host{System: sys, Client: client, Store: entities.NewMemoryStore()}); err != nil {
		t.Fatal(err)
	}
	if _, err := ordering.TimedAction.Start(client); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"placed", "confirmed"} {
		if _, err := ordering.PlaceOrder.Invoke(ctx, client, id, ordering.OrderRequest{Item: "x", Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ordering.Confirm.Invoke(ctx, client, "confirmed", done); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"placed", "confirmed", "missing"} {
		if err := ordering.ExpireOrder.Invoke(ctx, client, id); err != nil {
			t.Errorf("expireOrder(%s): %v", id, err)
		}
	}
	if _, err := ordering.Status.Invoke(ctx, client, "placed", done); err == nil {
		t.Error("the expired order is still placed")
	}
	if o, err := ordering.Status.Invoke(ctx, client, "confirmed", done); err != nil || !o.Confirmed {
		t.Errorf("the confirmed order after expiry: %+v, %v", o, err)
	}
}
