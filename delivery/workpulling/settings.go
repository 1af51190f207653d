package workpulling

import (
	"fmt"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/delivery/internal/pattern"
)

// DefaultBufferSize is the default of [Settings.BufferSize].
const DefaultBufferSize = 1000

// ErrBufferFull is wrapped by the error with which a work-pulling producer
// controller stops when its producer sends more messages than its buffer
// holds, which only a producer that does not wait for [RequestNext] can
// do. It is sharding.ErrBufferFull too.
var ErrBufferFull = pattern.ErrBufferFull

// Settings configure a work-pulling producer controller. A zero
// field takes its default.
type Settings struct {
	// BufferSize bounds the messages from the producer that wait for a
	// worker with demand (default 1000). A producer that waits for each
	// RequestNext never fills it; one more message than it holds stops the
	// controller with an error wrapping [ErrBufferFull]. The unconfirmed
	// messages of a worker that left, which wait for another worker, do
	// not count: they were accepted already, and are never dropped.
	BufferSize int
	// Producer configures the producer controller of each worker:
	// chunking (ChunkLargeMessages, with the codec of
	// [delivery.WithProducerCodec]) and the resend-first interval. Its durable
	// queue fields configure the work-pulling controller's own calls to
	// its durable queue ([delivery.WithDurableQueue]).
	Producer delivery.ProducerSettings
}

// DefaultSettings are the defaults, written out.
func DefaultSettings() Settings {
	s, _ := Settings{}.validate()
	return s
}

// validate returns the settings with defaults applied, or an error naming
// the first field out of range.
func (s Settings) validate() (Settings, error) {
	if s.BufferSize == 0 {
		s.BufferSize = DefaultBufferSize
	}
	if s.BufferSize < 1 {
		return s, controller.Invalid("workpulling.Settings.BufferSize", s.BufferSize, "must be at least 1 (or 0 for the default)")
	}
	p, err := impl.ValidateProducerSettings(s.Producer)
	if err != nil {
		return s, fmt.Errorf("workpulling.Settings.Producer: %w", err)
	}
	s.Producer = p
	return s, nil
}
