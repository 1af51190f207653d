package sharding

import (
	"fmt"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/delivery/internal/pattern"
)

// Defaults of the sharding settings; a zero field of a settings struct
// means its default.
const (
	DefaultBufferSize                        = 1000
	DefaultCleanupUnusedAfter                = 120 * time.Second
	DefaultResendFirstUnconfirmedIdleTimeout = 10 * time.Second
)

// ErrBufferFull is wrapped by the error with which a sharding producer
// controller stops when its producer sends more messages than its buffer
// holds, which only a producer that does not wait for [RequestNext] can
// do. It is workpulling.ErrBufferFull too.
var ErrBufferFull = pattern.ErrBufferFull

// Settings configure a sharding producer controller. A zero field
// takes its default.
type Settings struct {
	// BufferSize bounds the messages buffered for entities without demand,
	// all entities together (default 1000). The controller sends no
	// RequestNext while it is full; a message sent anyway stops the
	// controller with an error wrapping [ErrBufferFull].
	BufferSize int
	// CleanupUnusedAfter is how long the producer controller of an entity
	// may be idle, with nothing unconfirmed or buffered, before it is
	// stopped (default 120 s). The next message to the entity starts a
	// new one.
	CleanupUnusedAfter time.Duration
	// ResendFirstUnconfirmedIdleTimeout is how long an entity with
	// unconfirmed messages may go without answering before they are sent
	// again, which starts the entity again if it was passivated
	// (default 10 s).
	ResendFirstUnconfirmedIdleTimeout time.Duration
	// Producer configures the producer controller of each entity, as
	// workpulling.Settings.Producer does each worker's.
	Producer delivery.ProducerSettings
}

// DefaultSettings are the defaults, written out.
func DefaultSettings() Settings {
	s, _ := Settings{}.validate()
	return s
}

func (s Settings) validate() (Settings, error) {
	if s.BufferSize == 0 {
		s.BufferSize = DefaultBufferSize
	}
	if s.CleanupUnusedAfter == 0 {
		s.CleanupUnusedAfter = DefaultCleanupUnusedAfter
	}
	if s.ResendFirstUnconfirmedIdleTimeout == 0 {
		s.ResendFirstUnconfirmedIdleTimeout = DefaultResendFirstUnconfirmedIdleTimeout
	}
	switch {
	case s.BufferSize < 1:
		return s, controller.Invalid("sharding.Settings.BufferSize", s.BufferSize, "must be at least 1 (or 0 for the default)")
	case s.CleanupUnusedAfter < time.Millisecond:
		return s, controller.Invalid("sharding.Settings.CleanupUnusedAfter", s.CleanupUnusedAfter, "must be at least 1ms")
	case s.ResendFirstUnconfirmedIdleTimeout < time.Millisecond:
		return s, controller.Invalid("sharding.Settings.ResendFirstUnconfirmedIdleTimeout", s.ResendFirstUnconfirmedIdleTimeout, "must be at least 1ms")
	}
	p, err := impl.ValidateProducerSettings(s.Producer)
	if err != nil {
		return s, fmt.Errorf("sharding.Settings.Producer: %w", err)
	}
	s.Producer = p
	return s, nil
}

// ConsumerSettings configure the consumer side of sharding: the
// entity's [NewConsumerController]. A zero field takes its default.
type ConsumerSettings struct {
	// BufferSize bounds the messages kept until the consumer has started
	// (default 1000); beyond it they are dropped, and the producer
	// controllers send them again.
	BufferSize int
	// Consumer configures the consumer controller made for each producer.
	Consumer delivery.ConsumerSettings
}

// DefaultConsumerSettings are the defaults, written out.
func DefaultConsumerSettings() ConsumerSettings {
	s, _ := ConsumerSettings{}.validate()
	return s
}

func (s ConsumerSettings) validate() (ConsumerSettings, error) {
	if s.BufferSize == 0 {
		s.BufferSize = DefaultBufferSize
	}
	if s.BufferSize < 1 {
		return s, controller.Invalid("sharding.ConsumerSettings.BufferSize", s.BufferSize, "must be at least 1 (or 0 for the default)")
	}
	c, err := impl.ValidateConsumerSettings(s.Consumer)
	if err != nil {
		return s, fmt.Errorf("sharding.ConsumerSettings.Consumer: %w", err)
	}
	s.Consumer = c
	return s, nil
}
