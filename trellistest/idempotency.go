package trellistest

import (
	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/idempotency"
)

// NewIdempotencyStore is an in-memory api.IdempotencyStore on clock (the
// real one when nil), for testing a handler behind api.Idempotency
// without a service: the same store the embedded store's services use.
// Under Start, Host.Idempotent already has the service's own.
func NewIdempotencyStore(clock clockwork.Clock) api.IdempotencyStore {
	return idempotency.NewMemoryStore(clock)
}
