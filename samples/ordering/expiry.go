package ordering

import (
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/timedactions"
	"github.com/trellis-go/trellis/timers"
)

// TimedAction is the order-timed-action component.
var TimedAction = timedactions.Define("order-timed-action")

// ExpireOrder expires the order whose timer fired (the order's [Expire]).
// Cancelled and already confirmed are done. Not placed is retried, by
// failing the firing, until its attempt NotPlacedAttempts (3 s, 6 s,
// 12 s and 24 s apart: 45 s, over the 30 s request timeout), and then
// done: the
// order's placement was not stored, or had not landed yet (its timer was
// created first; a write whose answer was lost may land late). A failure
// to reach the order fails it, and the timer retries.
var ExpireOrder = timedactions.Method(TimedAction, "expireOrder",
	func(ctx *timedactions.Ctx, orderID string) timedactions.Effect {
		res, err := Expire.Invoke(ctx.Context(), ctx.Client(), orderID, components.Done{})
		if err != nil {
			return ctx.Error("expire order %s: %v", orderID, err)
		}
		if f, ok := timers.FiringFromContext(ctx.Context()); ok && res.Outcome == NotFound && f.Attempt < NotPlacedAttempts {
			return ctx.Error("expire order %s: not placed yet; looking again later", orderID)
		}
		return ctx.Done()
	})

// NotPlacedAttempts is how many times a timer looks for its order before
// it takes "not placed" as final.
const NotPlacedAttempts = 5

// TimerName is the name of the timer that expires order id.
func TimerName(orderID string) string { return "order-expiration-timer-" + orderID }
