package ordering_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/trellistest"
)

// TestNotices: end to end in-process (HTTP, the entity, the timer on a
// fake clock, the consumer): an order confirmed and an order expired
// each get one notice, logged; an order placed and left alone gets none
// until it ends.
func TestNotices(t *testing.T) {
	const expiry = time.Minute
	var notices *ordering.Notices
	setup := orderApp(expiry, &notices)
	ts := trellistest.Start(t, setup)
	placeOrder := func() string {
		resp := ts.Post(t, "/orders", map[string]any{"item": "tea", "quantity": 2})
		if resp.Status != http.StatusCreated {
			t.Fatalf("POST /orders: %d %s", resp.Status, resp.Body)
		}
		var o contract.Order
		resp.JSON(t, &o)
		return o.Id
	}
	confirmed, expired := placeOrder(), placeOrder()
	if resp := ts.Post(t, "/orders/"+confirmed+"/confirm", nil); resp.Status != http.StatusOK {
		t.Fatalf("confirm: %d %s", resp.Status, resp.Body)
	}
	ts.WaitConsumers(t)
	want := []ordering.Notice{{OrderID: confirmed, Kind: ordering.NoticeConfirmed}}
	if got := notices.List(); !slices.Equal(got, want) {
		t.Fatalf("notices %+v, want %+v", got, want)
	}
	ts.AdvanceTimers(t, expiry)
	ts.WaitConsumers(t)
	want = append(want, ordering.Notice{OrderID: expired, Kind: ordering.NoticeEnded})
	if got := notices.List(); !slices.Equal(got, want) {
		t.Fatalf("notices %+v, want %+v", got, want)
	}
	if n := strings.Count(ts.Logs(), `"msg":"order notice"`); n != 2 {
		t.Fatalf("%d notices logged, want 2", n)
	}
}

// orderApp is the order sample's setup: the entity, the timed action,
// the notices consumer (set in *notices), the customers' orders view and
// the order routes, orders
// expiring after expiry.
func orderApp(expiry time.Duration, notices **ordering.Notices) trellis.Setup {
	return func(h *trellis.Host, r chi.Router) error {
		if _, err := ordering.Orders.Start(h.Entities()); err != nil {
			return err
		}
		if _, err := ordering.TimedAction.Start(h.Client); err != nil {
			return err
		}
		*notices = ordering.NewNotices(h.Logger)
		if _, err := (*notices).Consumer().Start(h.Consumers()); err != nil {
			return err
		}
		orders, err := ordering.NewEndpoint(h.Client, h.Timers, expiry)
		if err != nil {
			return err
		}
		if err := ordering.CustomerOrders.Start(h.Views()); err != nil {
			return err
		}
		orders.ServeViews(h.Views(), h.Clock)
		contract.HandlerWithOptions(orderRoutes{Endpoint: orders}, contract.ChiServerOptions{BaseRouter: r, ErrorHandlerFunc: api.WriteParamError})
		return nil
	}
}

// orderRoutes serves the order routes of the samples' contract; the
// counter's answer 501.
type orderRoutes struct {
	*ordering.Endpoint
	otherRoutes
}

type otherRoutes struct{ contract.Unimplemented }
