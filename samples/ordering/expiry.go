package ordering

import (
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/timedactions"
)

// TimedAction is the order-timed-action component.
var TimedAction = timedactions.Define("order-timed-action")

// ExpireOrder expires the order whose timer fired (the order's [Expire]).
// Every business result — cancelled, already confirmed, not placed (then
// marked, so that it never will be) — is done; only a failure to reach the
// order fails it, and then the timer retries.
var ExpireOrder = timedactions.Method(TimedAction, "expireOrder",
	func(ctx *timedactions.Ctx, orderID string) timedactions.Effect {
		if _, err := Expire.Invoke(ctx.Context(), ctx.Client(), orderID, components.Done{}); err != nil {
			return ctx.Error("expire order %s: %v", orderID, err)
		}
		return ctx.Done()
	})

// TimerName is the name of the timer that expires order id.
func TimerName(orderID string) string { return "order-expiration-timer-" + orderID }
