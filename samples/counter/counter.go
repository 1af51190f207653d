// Package counter is the smallest useful key-value entity: a named counter
// that can be increased, read and deleted. The server exposes it at
// /counters/{id}; tests and benchmarks use it to drive an entity through
// the whole stack.
package counter

import (
	"slices"
	"strings"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Max is the largest value a counter may reach.
const Max = 1_000_000_000

// Counter is the state of one counter. Applied holds the Idempotency-Keys
// of the last increases made with one (see IncreaseOnce), separated by
// spaces (a key has none), so that the state stays comparable.
type Counter struct {
	ID      string `json:"id"`
	Value   int64  `json:"value"`
	Applied string `json:"applied,omitempty"`
}

// Entity is the counter entity, component id "counter".
var Entity = entities.Define("counter", func(id string) Counter { return Counter{ID: id} })

// Increase adds by to the counter and replies with the new state. A counter
// would pass Max is refused with error(message).
var Increase = entities.Command(Entity, "increase",
	func(ctx *entities.Ctx[Counter, Counter], c Counter, by int64) entities.Effect[Counter, Counter] {
		if by > Max-c.Value {
			return ctx.Error("counter %s would exceed %d", c.ID, int64(Max))
		}
		c.Value += by
		return ctx.UpdateState(c).ThenReply(c)
	})

// MaxApplied is how many Idempotency-Keys a counter keeps: a retry with a
// key finds it as long as fewer than MaxApplied other keyed increases came
// since (the key's retention, 24 h, bounds the retries anyway).
const MaxApplied = 16

// Once is the argument of IncreaseOnce: the amount and the request's
// Idempotency-Key.
type Once struct {
	By  int64  `json:"by"`
	Key string `json:"key"`
}

// IncreaseOnce is Increase made idempotent per key, for a request with an
// Idempotency-Key: the key is kept with the counter, in the same write as
// the increase, and an increase whose key is kept already changes nothing
// and replies with the counter as it is. A retry after an unknown outcome
// (its first run's write may have landed) so increases the counter once.
var IncreaseOnce = entities.Command(Entity, "increaseOnce",
	func(ctx *entities.Ctx[Counter, Counter], c Counter, req Once) entities.Effect[Counter, Counter] {
		keys := strings.Fields(c.Applied)
		if slices.Contains(keys, req.Key) {
			return ctx.Reply(c)
		}
		if req.By > Max-c.Value {
			return ctx.Error("counter %s would exceed %d", c.ID, int64(Max))
		}
		c.Value += req.By
		keys = append(keys, req.Key)
		c.Applied = strings.Join(keys[max(0, len(keys)-MaxApplied):], " ")
		return ctx.UpdateState(c).ThenReply(c)
	})

// Get replies with the counter (value 0 if it was never increased).
var Get = entities.Command(Entity, "get",
	func(ctx *entities.Ctx[Counter, Counter], c Counter, _ components.Done) entities.Effect[Counter, Counter] {
		return ctx.Reply(c)
	})

// Delete removes the counter and replies with its last state.
var Delete = entities.Command(Entity, "delete",
	func(ctx *entities.Ctx[Counter, Counter], c Counter, _ components.Done) entities.Effect[Counter, Counter] {
		return ctx.DeleteEntity().ThenReply(c)
	})
