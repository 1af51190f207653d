// Package counter is the smallest useful key-value entity: a named counter
// that can be increased, read and deleted. The server exposes it at
// /counters/{id}; tests and benchmarks use it to drive an entity through
// the whole stack.
package counter

import (
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Max is the largest value a counter may reach.
const Max = 1_000_000_000

// Counter is the state of one counter.
type Counter struct {
	ID    string `json:"id"`
	Value int64  `json:"value"`
}

// Entity is the counter entity, component id "counter".
var Entity = entities.Define("counter", func(id string) Counter { return Counter{ID: id} })

// Increase adds by to the counter and replies with the new state. A counter
// would pass Max is refused with error(message). Invoked with an
// Idempotency-Key (the endpoint's request carries one to it), it is
// applied once per key: the platform records the key with the write and
// answers a retry with the first answer.
var Increase = entities.Command(Entity, "increase",
	func(ctx *entities.Ctx[Counter, Counter], c Counter, by int64) entities.Effect[Counter, Counter] {
		if by > Max-c.Value {
			return ctx.Error("counter %s would exceed %d", c.ID, int64(Max))
		}
		c.Value += by
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
