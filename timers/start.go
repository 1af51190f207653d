package timers

import (
	"context"
	"sync"
	"time"
)

// retrier is the background start of StartRetrying.
type retrier struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartRetrying starts the scheduler as Start does, and while its store
// cannot be reached keeps trying every interval in the background, until
// a start succeeds or Shutdown: so that a service can boot before its
// Redis, and report itself not ready (Ready) meanwhile instead of refusing
// to start. Shutdown stops the retries, then the scheduler.
func (s *Scheduler) StartRetrying(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.retry.cancel = cancel
	s.mu.Unlock()
	err := s.Start(ctx)
	if err == nil {
		return
	}
	s.log.Warn("timer scheduler not started; retrying in the background", "err", err.Error(), "every", interval.String())
	s.retry.wg.Add(1)
	go func() {
		defer s.retry.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.Start(ctx); err == nil {
				s.log.Info("timer scheduler started")
				return
			}
		}
	}()
}

// stopRetrying ends the retries of StartRetrying and waits for them.
func (s *Scheduler) stopRetrying() {
	s.mu.Lock()
	cancel := s.retry.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.retry.wg.Wait()
}
