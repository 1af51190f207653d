package assembly

import (
	"context"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/timers"
)

// timerRetry is how long the service waits between attempts to start the
// timer scheduler when its store cannot be reached.
const timerRetry = time.Second

// newTimers makes the host's timer scheduler on the same store as the
// entities, early: the consumers' handlers get it (consumers.Ctx.Timers).
// It runs as a part of its own (startTimers).
func newTimers(a *assembly) error {
	h := a.host
	var store timers.Store
	if h.Redis != nil {
		var ropts []timers.RedisOption
		if a.cfg.ClockSet {
			ropts = append(ropts, timers.WithRedisClock(h.Clock))
		}
		store = timers.NewRedisStore(h.Redis, a.cfg.RedisPrefix, ropts...)
	} else {
		store = timers.NewMemoryStore(h.Clock)
	}
	sched, err := timers.New(store, h.Client, timers.Config{Logger: h.Logger, DeadLetterRetention: a.cfg.TimerDeadLetterRetention})
	if err != nil {
		return fmt.Errorf("trellis: timer scheduler: %w", err)
	}
	h.Timers = sched
	a.collectors = append(a.collectors, sched.Collector())
	return nil
}

// startTimers adds the timer scheduler to the list: it fires once every
// other part has started, and stops first after HTTP: a timer's call
// reaches entities and timed actions, so the calls in flight finish (or
// are released for another instance) while those can still answer.
func startTimers(a *assembly) error {
	sched := a.host.Timers
	a.add(part{name: "the timer scheduler",
		start: func(context.Context) error { sched.StartRetrying(timerRetry); return nil },
		stop:  sched.Shutdown})
	return nil
}
