package delivery

import (
	"fmt"
	"time"
)

// Defaults of the work-pulling and sharding settings; a zero field of a
// settings struct means its default.
const (
	DefaultBufferSize                        = 1000
	DefaultCleanupUnusedAfter                = 120 * time.Second
	DefaultResendFirstUnconfirmedIdleTimeout = 10 * time.Second
)

// WorkPullingSettings configure a work-pulling producer controller. A zero
// field takes its default.
type WorkPullingSettings struct {
	// BufferSize bounds the messages from the producer that wait for a
	// worker with demand (default 1000). A producer that waits for each
	// RequestNext never fills it; one more message than it holds stops the
	// controller with an error wrapping [ErrBufferFull]. The unconfirmed
	// messages of a worker that left, which wait for another worker, do
	// not count: they were accepted already, and are never dropped.
	BufferSize int
	// Producer configures the producer controller of each worker:
	// chunking (ChunkLargeMessages, with the codec of
	// [WithProducerCodec]) and the resend-first interval. Its durable
	// queue fields configure the work-pulling controller's own calls to
	// its durable queue ([WithDurableQueue]).
	Producer ProducerSettings
}

// DefaultWorkPullingSettings are the defaults, written out.
func DefaultWorkPullingSettings() WorkPullingSettings {
	s, _ := WorkPullingSettings{}.validate()
	return s
}

// validate returns the settings with defaults applied, or an error naming
// the first field out of range.
func (s WorkPullingSettings) validate() (WorkPullingSettings, error) {
	if s.BufferSize == 0 {
		s.BufferSize = DefaultBufferSize
	}
	if s.BufferSize < 1 {
		return s, invalid("WorkPullingSettings.BufferSize", s.BufferSize, "must be at least 1 (or 0 for the default)")
	}
	p, err := s.Producer.validate()
	if err != nil {
		return s, fmt.Errorf("WorkPullingSettings.Producer: %w", err)
	}
	s.Producer = p
	return s, nil
}

// ShardingSettings configure a sharding producer controller. A zero field
// takes its default.
type ShardingSettings struct {
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
	// [WorkPullingSettings.Producer] does each worker's.
	Producer ProducerSettings
}

// DefaultShardingSettings are the defaults, written out.
func DefaultShardingSettings() ShardingSettings {
	s, _ := ShardingSettings{}.validate()
	return s
}

func (s ShardingSettings) validate() (ShardingSettings, error) {
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
		return s, invalid("ShardingSettings.BufferSize", s.BufferSize, "must be at least 1 (or 0 for the default)")
	case s.CleanupUnusedAfter < time.Millisecond:
		return s, invalid("ShardingSettings.CleanupUnusedAfter", s.CleanupUnusedAfter, "must be at least 1ms")
	case s.ResendFirstUnconfirmedIdleTimeout < time.Millisecond:
		return s, invalid("ShardingSettings.ResendFirstUnconfirmedIdleTimeout", s.ResendFirstUnconfirmedIdleTimeout, "must be at least 1ms")
	}
	p, err := s.Producer.validate()
	if err != nil {
		return s, fmt.Errorf("ShardingSettings.Producer: %w", err)
	}
	s.Producer = p
	return s, nil
}

// ShardingConsumerSettings configure the consumer side of sharding: the
// entity's ShardingConsumerController. A zero field takes its default.
type ShardingConsumerSettings struct {
	// BufferSize bounds the messages kept until the consumer has started
	// (default 1000); beyond it they are dropped, and the producer
	// controllers send them again.
	BufferSize int
	// Consumer configures the consumer controller made for each producer.
	Consumer ConsumerSettings
}

// DefaultShardingConsumerSettings are the defaults, written out.
func DefaultShardingConsumerSettings() ShardingConsumerSettings {
	s, _ := ShardingConsumerSettings{}.validate()
	return s
}

func (s ShardingConsumerSettings) validate() (ShardingConsumerSettings, error) {
	if s.BufferSize == 0 {
		s.BufferSize = DefaultBufferSize
	}
	if s.BufferSize < 1 {
		return s, invalid("ShardingConsumerSettings.BufferSize", s.BufferSize, "must be at least 1 (or 0 for the default)")
	}
	c, err := s.Consumer.validate()
	if err != nil {
		return s, fmt.Errorf("ShardingConsumerSettings.Consumer: %w", err)
	}
	s.Consumer = c
	return s, nil
}
