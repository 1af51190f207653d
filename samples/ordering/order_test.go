package ordering_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/trellistest"
)

var done = components.Done{}

// The order entity's commands, one at a time against a given state, as the
// reference sample specifies them.
func TestOrderCommands(t *testing.T) {
	placed := ordering.Order{ID: "o1", Placed: true, Item: "Pizza", Quantity: 2}
	confirmed := placed
	confirmed.Confirmed = true
	empty := ordering.Order{ID: "o1"}
	marked := ordering.Order{ID: "o1", Expired: true}

	place := entities.Try(ordering.Orders, ordering.PlaceOrder, "o1", empty, ordering.OrderRequest{Item: "Pizza", Quantity: 2}, nil)
	if !place.Updated || place.State != placed || place.Reply != placed {
		t.Errorf("placeOrder: %+v", place)
	}
	// Placing again (a retry with the same Idempotency-Key) changes nothing.
	for _, current := range []ordering.Order{placed, {ID: "o1", Placed: true, Confirmed: true, Item: "Pizza", Quantity: 2}} {
		again := entities.Try(ordering.Orders, ordering.PlaceOrder, "o1", current, ordering.OrderRequest{Item: "Pizza", Quantity: 2}, nil)
		if again.Updated || again.Deleted || again.Reply != current {
			t.Errorf("placeOrder on %+v: %+v; want the order as it is, unwritten", current, again)
		}
	}
	// After a mark that earlier versions wrote: placed and expired at once,
	// the mark removed.
	late := entities.Try(ordering.Orders, ordering.PlaceOrder, "o1", marked, ordering.OrderRequest{Item: "Pizza", Quantity: 2}, nil)
	if !late.Deleted || late.State != empty || late.Reply != placed {
		t.Errorf("placeOrder after its expiry: %+v", late)
	}

	tests := []struct {
		name        string                                                    // the case
		cmd         components.EntityMethod[components.Done, ordering.Result] // confirm, cancel or expire
		state       ordering.Order                                            // the state before
		wantOutcome ordering.Outcome                                          // the business result
		wantMessage string                                                    // its message
		wantState   ordering.Order                                            // the state after
		wantDeleted bool                                                      // the entity was deleted
		wantUpdated bool                                                      // the entity was written
	}{
		{"confirm placed", ordering.Confirm, placed, ordering.OK, "", confirmed, false, true},
		{"confirm twice", ordering.Confirm, confirmed, ordering.OK, "", confirmed, false, true},
		{"confirm not placed", ordering.Confirm, empty, ordering.NotFound, "No order found for o1", empty, false, false},
		{"confirm expired", ordering.Confirm, marked, ordering.NotFound, "No order found for o1", marked, false, false},
		{"cancel placed", ordering.Cancel, placed, ordering.OK, "", empty, true, false},
		{"cancel confirmed", ordering.Cancel, confirmed, ordering.Invalid, "Cannot cancel an already confirmed order", confirmed, false, false},
		{"cancel not placed", ordering.Cancel, empty, ordering.NotFound, "No order found for o1", empty, false, false},
		{"cancel expired", ordering.Cancel, marked, ordering.NotFound, "No order found for o1", marked, false, false},
		{"expire placed", ordering.Expire, placed, ordering.OK, "", empty, true, false},
		{"expire confirmed", ordering.Expire, confirmed, ordering.Invalid, "Cannot cancel an already confirmed order", confirmed, false, false},
		{"expire not placed (yet): nothing written", ordering.Expire, empty, ordering.NotFound, "No order found for o1", empty, false, false},
		{"expire an earlier version's mark", ordering.Expire, marked, ordering.NotFound, "No order found for o1", marked, false, false},
	}
	for _, tc := range tests {
		out := entities.Try(ordering.Orders, tc.cmd, "o1", tc.state, done, nil)
		if out.Err != nil || out.Reply.Outcome != tc.wantOutcome || out.Reply.Message != tc.wantMessage ||
			out.State != tc.wantState || out.Deleted != tc.wantDeleted || out.Updated != tc.wantUpdated {
			t.Errorf("%s: %+v", tc.name, out)
		}
	}

	for _, state := range []ordering.Order{empty, marked} {
		status := entities.Try(ordering.Orders, ordering.Status, "o1", state, done, nil)
		if msg, ok := components.IsCommandError(status.Err); !ok || msg != "No order found for 'o1'" {
			t.Errorf("status of an order not placed (%+v): %+v", state, status)
		}
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

// However the timer's expiry and the placement interleave on the order
// entity (each order's commands run one at a time), no order stays placed
// once its timer has run, and nothing is left in the store for an order
// that was never placed, on a real Redis store. Expiring first is what a
// short expiry, a slow store or a placement whose outcome was unknown
// does: the timer is created before the order is stored, and its firing
// looks again later (a second expire step).
func TestExpiryAndPlacementInAnyOrder(t *testing.T) {
	const (
		place   = "place"   // PlaceOrder
		expire  = "expire"  // the timer's action, ExpireOrder
		confirm = "confirm" // Confirm
	)
	tests := []struct {
		name       string   // the case
		steps      []string // the commands, in order
		wantPlaced bool     // the order is placed at the end
		wantStored bool     // the store holds a record for the order at the end
	}{
		{"placed, then expired", []string{place, expire}, false, false},
		{"placed twice (a retry with its key), then expired", []string{place, place, expire}, false, false},
		{"expired before it is placed, then again", []string{expire, place, expire}, false, false},
		{"confirmed before its expiry", []string{place, confirm, expire}, true, true},
		{"expired, never placed: nothing stored", []string{expire, expire}, false, false},
	}
	sys := runtime.NewSystem(t.Name(), runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer func() { _ = sys.Shutdown(context.Background()) }()
	rdb, prefix := trellistest.Redis(t), "test-"+rand.Text()
	t.Cleanup(func() {
		if err := clearKeys(rdb, []string{prefix}); err != nil {
			t.Errorf("clear the test's keys: %v", err)
		}
	})
	store := entities.NewRedisStore(rdb, prefix)
	client := components.NewClient(components.NewRegistry())
	if _, err := ordering.Orders.Start(entities.Host{System: sys, Client: client, Store: store}); err != nil {
		t.Fatal(err)
	}
	if _, err := ordering.TimedAction.Start(client); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i, tc := range tests {
		id := fmt.Sprintf("o-%d", i)
		for _, step := range tc.steps {
			var err error
			switch step {
			case place:
				_, err = ordering.PlaceOrder.Invoke(ctx, client, id, ordering.OrderRequest{Item: "x", Quantity: 1})
			case expire:
				err = ordering.ExpireOrder.Invoke(ctx, client, id)
			case confirm:
				_, err = ordering.Confirm.Invoke(ctx, client, id, done)
			}
			if err != nil {
				t.Fatalf("%s: %s: %v", tc.name, step, err)
			}
		}
		o, err := ordering.Status.Invoke(ctx, client, id, done)
		if placed := err == nil && o.Placed; placed != tc.wantPlaced {
			t.Errorf("%s: placed at the end = %v (%+v, %v), want %v", tc.name, placed, o, err, tc.wantPlaced)
		}
		rec, err := store.Load(ctx, "order", id)
		if err != nil {
			t.Fatal(err)
		}
		if stored := rec.Revision != 0; stored != tc.wantStored {
			t.Errorf("%s: stored at the end = %v (%s), want %v", tc.name, stored, rec.Data, tc.wantStored)
		}
	}
}
