package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/views"
)

// Endpoint serves the order routes of the contract (PlaceOrder, GetOrder,
// ConfirmOrder and CancelOrder of contract.ServerInterface): it keeps every
// placed order paired with the timer that expires it. Start Orders and
// TimedAction on the same client first, and the scheduler's timers then
// reach them.
type Endpoint struct {
	client *components.Client
	timers *timers.Scheduler
	expiry time.Duration
	views  *views.Runner // nil: the customers' lists are off (see ServeViews)
	clock  clockwork.Clock
}

// NewEndpoint makes the endpoint over client and scheduler; an order that
// is not confirmed within expiry (which must be positive) is cancelled.
func NewEndpoint(client *components.Client, scheduler *timers.Scheduler, expiry time.Duration) (*Endpoint, error) {
	switch {
	case client == nil || scheduler == nil:
		return nil, errors.New("ordering.NewEndpoint: nil client or scheduler")
	case expiry <= 0:
		return nil, fmt.Errorf("ordering.NewEndpoint: the expiry must be positive, not %v", expiry)
	}
	return &Endpoint{client: client, timers: scheduler, expiry: expiry, clock: clockwork.NewRealClock()}, nil
}

// IdempotentRoutes are the order routes that take an Idempotency-Key
// (see api.Idempotency): each is idempotent per key. Placing derives the
// order's id from the key, so that a retry finds the order its first run
// may have stored; confirming twice is confirming; cancelling twice
// cancels once.
var IdempotentRoutes = []string{"POST /orders", "POST /orders/{id}/confirm", "POST /orders/{id}/cancel"}

// PlaceOrder handles POST /orders: it gives the order its id (derived from
// the Idempotency-Key, else a new UUID), creates its expiry timer, then
// places it, and answers 201 with the order and its Location.
//
// The answers keep their promises: 503 when no order was placed (the
// timer could not be created, or the order's write provably did not reach
// the store, and then its timer is deleted), 504 when the order's write
// was sent and its answer lost (the order may exist: its timer stays, to
// expire it; a retry with the same key finds it).
func (e *Endpoint) PlaceOrder(w http.ResponseWriter, r *http.Request) {
	var body contract.OrderRequest
	if err := api.Decode(r, &body); err != nil {
		api.WriteError(w, r, err)
		return
	}
	ctx := r.Context()
	id := IDForKey(api.IdempotencyKey(ctx))
	call, err := ExpireOrder.Deferred(id)
	if err != nil {
		api.WriteError(w, r, fmt.Errorf("place order %s: %w", id, err))
		return
	}
	// The timer first: the other way round, a crash between the two would
	// leave an order that never expires. A crash after the timer leaves a
	// timer with no order, which finds nothing to expire and ends (see
	// ExpireOrder); nothing is written for it.
	if _, err := e.timers.Create(ctx, TimerName(id), e.expiry, call); err != nil {
		timerUnavailable(w, r, id, err)
		return
	}
	// PlaceOrder here is the entity's command, not this method.
	o, err := PlaceOrder.Invoke(ctx, e.client, id, OrderRequest{Item: body.Item, Quantity: body.Quantity,
		Customer: body.Customer, PlacedAt: e.clock.Now().UnixMilli()})
	if err != nil {
		if errors.Is(err, components.ErrUnavailable) && !errors.Is(err, components.ErrOutcomeUnknown) {
			// Not stored: its timer has nothing to expire.
			e.deleteTimer(r, id)
		}
		// Otherwise the timer is kept on purpose: the order may have been
		// stored (its reply lost), and then only the timer expires it.
		api.WriteError(w, r, fmt.Errorf("place order %s: %w", id, err))
		return
	}
	w.Header().Set("Location", "/orders/"+id)
	e.setPosition(w, r, id)
	api.WriteJSON(w, r, http.StatusCreated, toAPI(o))
}

// orderIDSpace is the UUID namespace of the order ids derived from keys.
var orderIDSpace = uuid.MustParse("8d4f6c1e-3a57-4b8e-9f0d-2c6e1b7a5d93")

// IDForKey is the id of a new order: derived from the request's
// Idempotency-Key (a name-based UUID, so that a retry with the key
// addresses the same order), or a random UUID without one.
func IDForKey(key string) string {
	if key == "" {
		return uuid.NewString()
	}
	return uuid.NewSHA1(orderIDSpace, []byte(key)).String()
}

// GetOrder handles GET /orders/{id}: the order while it is placed, else 404.
func (e *Endpoint) GetOrder(w http.ResponseWriter, r *http.Request, rawID contract.OrderID) {
	id, ok := checkID(w, r, rawID)
	if !ok {
		return
	}
	o, err := Status.Invoke(r.Context(), e.client, id, components.Done{})
	if err != nil { // an order that is not placed is status's NotFound: 404
		api.WriteError(w, r, fmt.Errorf("order %s status: %w", id, err))
		return
	}
	api.WriteJSON(w, r, http.StatusOK, toAPI(o))
}

// ConfirmOrder handles POST /orders/{id}/confirm: it confirms a placed
// order (again, if it is confirmed already), deletes its timer and answers
// 200 with the order; an order that is not placed is 404.
func (e *Endpoint) ConfirmOrder(w http.ResponseWriter, r *http.Request, rawID contract.OrderID) {
	id, ok := checkID(w, r, rawID)
	if !ok {
		return
	}
	res, err := Confirm.Invoke(r.Context(), e.client, id, components.Done{})
	if err != nil {
		api.WriteError(w, r, fmt.Errorf("confirm order %s: %w", id, err))
		return
	}
	if res.Outcome != OK { // confirm's only other outcome is NotFound
		api.WriteProblem(w, r, http.StatusNotFound, res.Message)
		return
	}
	e.deleteTimer(r, id)
	api.WriteJSON(w, r, http.StatusOK, toAPI(res.Order))
}

// CancelOrder handles POST /orders/{id}/cancel: it cancels the order,
// deletes its timer and answers 200 with the Result in every business case
// (cancelled, not found, already confirmed).
func (e *Endpoint) CancelOrder(w http.ResponseWriter, r *http.Request, rawID contract.OrderID) {
	id, ok := checkID(w, r, rawID)
	if !ok {
		return
	}
	res, err := Cancel.Invoke(r.Context(), e.client, id, components.Done{})
	if err != nil {
		// The timer stays, so that the order still expires if it is placed.
		api.WriteError(w, r, fmt.Errorf("cancel order %s: %w", id, err))
		return
	}
	e.deleteTimer(r, id)
	api.WriteJSON(w, r, http.StatusOK, contract.OrderResult{
		Outcome: contract.OrderResultOutcome(res.Outcome),
		Message: res.Message,
		Order:   toAPI(res.Order),
	})
}

// deleteTimer deletes order id's timer once the order no longer needs it.
// A failure is logged, not answered: the command already happened, and the
// timer left behind is harmless, since the cancel it runs finds the order
// confirmed or gone, which is done.
func (e *Endpoint) deleteTimer(r *http.Request, id string) {
	ctx := r.Context()
	if err := e.timers.Delete(ctx, TimerName(id)); err != nil {
		api.Logger(ctx).LogAttrs(ctx, slog.LevelWarn, "order timer not deleted; it will fire and find nothing to cancel",
			slog.String("requestId", api.RequestID(ctx)), slog.String("order", id), slog.String("err", err.Error()))
	}
}

// timerUnavailable answers a POST /orders whose timer could not be created:
// 503 saying that no order was placed and why (true even when the timer's
// create was sent and its answer lost: the order was not written; a timer
// left so finds no order and ends). A limit is named (it is the
// client's to know); any other cause goes to the log under the correlation
// id, since it may reveal internals.
func timerUnavailable(w http.ResponseWriter, r *http.Request, id string, err error) {
	const noOrder = "no order was placed: its expiry timer could not be created"
	var limit *timers.LimitError
	switch {
	case errors.As(err, &limit):
		api.WriteProblem(w, r, http.StatusServiceUnavailable, noOrder+": "+limit.Error())
		return
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The request timed out or went away: answered like any other.
		api.WriteError(w, r, fmt.Errorf("%s: %w", noOrder, err))
		return
	}
	ctx := r.Context()
	api.Logger(ctx).LogAttrs(ctx, slog.LevelError, "order timer not created; no order placed",
		slog.String("requestId", api.RequestID(ctx)), slog.String("order", id), slog.String("err", err.Error()))
	api.WriteProblem(w, r, http.StatusServiceUnavailable, noOrder+" (the timer store did not answer); retry later")
}

// toAPI is the contract's form of an order.
func toAPI(o Order) contract.Order {
	return contract.Order{Id: o.ID, Confirmed: o.Confirmed, Placed: o.Placed, Item: o.Item, Quantity: o.Quantity}
}
