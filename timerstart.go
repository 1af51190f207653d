package trellis

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/trellis-go/trellis/timers"
)

// timerRetry is how long the service waits between attempts to start the
// timer scheduler when its store cannot be reached.
const timerRetry = time.Second

// timerStarter starts the timer scheduler, and keeps trying in the
// background while the store is unreachable, so that a service can boot
// before its Redis and report itself not ready (/readyz) meanwhile instead
// of refusing to start.
type timerStarter struct {
	sched  *timers.Scheduler
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start makes the first attempt now; if it fails, it goes on retrying.
func (ts *timerStarter) start() {
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	err := ts.sched.Start(ctx)
	if err == nil {
		return
	}
	ts.log.Warn("timer scheduler not started; retrying in the background", "err", err.Error(), "every", timerRetry.String())
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		t := time.NewTicker(timerRetry)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := ts.sched.Start(ctx); err == nil {
				ts.log.Info("timer scheduler started")
				return
			}
		}
	}()
}

// shutdown stops retrying, then stops the scheduler if it runs.
func (ts *timerStarter) shutdown(ctx context.Context) error {
	if ts.cancel != nil {
		ts.cancel()
	}
	ts.wg.Wait()
	return ts.sched.Shutdown(ctx)
}
