// Package timedactions owns timed actions: stateless methods that take one
// JSON argument and end done or with error(message), invoked only through
// deferred calls (by timers). A panic is an error, so the timer retries.
// They may call other components through the component client.
//
//	var Orders = timedactions.Define("order-timed-action")
//
//	var ExpireOrder = timedactions.Method(Orders, "expireOrder",
//		func(ctx *timedactions.Ctx, orderID string) timedactions.Effect {
//			if _, err := Cancel.Invoke(ctx.Context(), ctx.Client(), orderID, components.Done{}); err != nil {
//				return ctx.Error("cancel %s: %v", orderID, err)
//			}
//			return ctx.Done()
//		})
package timedactions
