package timers

import (
	"fmt"
	"log/slog"
	"time"
)

// The defaults and the ceilings of [Config]. The limits are Akka's; they
// may be configured downwards only.
const (
	DefaultMaxActive   = 50_000
	DefaultMaxPayload  = 1024
	DefaultMaxNameLen  = 512
	DefaultWorkers     = 128
	DefaultMaxBatch    = 512
	DefaultLease       = 30 * time.Second
	MaxLease           = 30 * time.Second
	DefaultCallTimeout = 25 * time.Second
	DefaultIdleCheck   = time.Second
)

// Config tunes a [Scheduler]. The zero value is the defaults.
type Config struct {
	// Workers is the number of call workers, the most calls in flight at
	// once on this instance (default 128). The loop claims only as many
	// timers as there are idle workers, so a burst of due timers waits in
	// the store, under no lease, instead of in memory: no goroutine per
	// timer, and no claimed timer waits long enough to lose its lease.
	Workers int
	// MaxBatch caps how many timers one claim takes (default 512).
	MaxBatch int
	// Lease is how long a claim holds a timer (default and at most 30 s).
	// If the claiming instance has not reported by then (it died, or lost
	// Redis), another instance runs the timer again.
	Lease time.Duration
	// CallTimeout bounds one call (default 25 s). It must be shorter than
	// Lease, so that a call that times out is reported while its lease
	// still holds and is not run twice at once.
	CallTimeout time.Duration
	// MaxActive is the most timers the store may hold (default and at most
	// 50,000). Every scheduler on one store should use the same value.
	MaxActive int
	// MaxPayload is the largest serialized argument, in bytes (default and
	// at most 1,024).
	MaxPayload int
	// MaxNameLen is the longest timer name, in bytes (default 512).
	MaxNameLen int
	// IdleCheck is the longest the loop sleeps without asking the store
	// (default 1 s). It is a safety net, not the firing mechanism: the loop
	// sleeps until the earliest due time and is woken by creates, but a
	// wake-up published by another instance can be lost while the pub/sub
	// connection reconnects, and a wiped store must be noticed while idle.
	IdleCheck time.Duration
	// DeadLetterRetention is how long a timer that gave up is kept as a
	// dead letter (default 7 days); older ones are pruned.
	DeadLetterRetention time.Duration
	// Logger receives the scheduler's logs (default slog.Default()).
	Logger *slog.Logger
}

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Workers, DefaultWorkers)
	def(&c.MaxBatch, DefaultMaxBatch)
	def(&c.MaxActive, DefaultMaxActive)
	def(&c.MaxPayload, DefaultMaxPayload)
	def(&c.MaxNameLen, DefaultMaxNameLen)
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = min(DefaultCallTimeout, c.Lease*5/6)
	}
	if c.IdleCheck == 0 {
		c.IdleCheck = DefaultIdleCheck
	}
	if c.DeadLetterRetention == 0 {
		c.DeadLetterRetention = DefaultDeadLetterRetention
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Workers < 0, c.MaxBatch < 0, c.MaxActive < 0, c.MaxPayload < 0, c.MaxNameLen < 0:
		return c, fmt.Errorf("timers config: negative size in %+v", c)
	case c.MaxActive > DefaultMaxActive:
		return c, fmt.Errorf("timers config: MaxActive %d is above the limit of %d", c.MaxActive, DefaultMaxActive)
	case c.MaxPayload > DefaultMaxPayload:
		return c, fmt.Errorf("timers config: MaxPayload %d is above the limit of %d", c.MaxPayload, DefaultMaxPayload)
	case c.Lease < 0 || c.Lease > MaxLease:
		return c, fmt.Errorf("timers config: Lease %v is not in (0, %v]", c.Lease, MaxLease)
	case c.CallTimeout <= 0 || c.CallTimeout >= c.Lease:
		return c, fmt.Errorf("timers config: CallTimeout %v must be positive and shorter than Lease %v", c.CallTimeout, c.Lease)
	case c.DeadLetterRetention < 0:
		return c, fmt.Errorf("timers config: negative DeadLetterRetention %v", c.DeadLetterRetention)
	case c.IdleCheck < 0:
		return c, fmt.Errorf("timers config: negative IdleCheck %v", c.IdleCheck)
	}
	return c, nil
}
