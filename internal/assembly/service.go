package assembly

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Service is a service Build made and started: its list of parts and its
// HTTP server. It ends once, by Shutdown or by a kill.
type Service struct {
	// HTTP serves the service's routes (Start, Serve).
	HTTP  *Server
	log   *slog.Logger
	parts parts

	endOnce sync.Once
	endErr  error
}

// Shutdown stops the parts gracefully, in the reverse order of the list,
// each within ctx. It may be called more than once; each call returns the
// first call's result (nil after a kill).
func (s *Service) Shutdown(ctx context.Context) error {
	s.endOnce.Do(func() {
		if err := s.parts.stopAll(ctx, s.log); err != nil {
			s.endErr = fmt.Errorf("trellis: shutdown: %w", err)
			return
		}
		s.log.Info("stopped")
	})
	return s.endErr
}

// kill stops the service the way a crash does, for the fault points of a
// test kit (internal/faulthook), walking the service's list (see
// parts.kill): the HTTP and cluster listeners and connections close at
// once, requests in flight included; the cluster membership is abandoned,
// not left (its key expires after the lease, and the others take its
// shards only then); no shard is handed over, and nothing is told to
// Redis any more (Redis is closed before the timer scheduler stops, so
// the timers it had claimed wait out their claim's lease, and the
// consumers save no checkpoint). What still runs in-process (handlers,
// entities, timer calls) then stops, so that no goroutine is left. A
// later Shutdown returns nil at once, and killing a service that was shut
// down does nothing.
func (s *Service) kill() {
	s.endOnce.Do(func() {
		s.log.Warn("killed: stopping without a goodbye (fault injection by a test)")
		ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
		defer cancel()
		s.parts.kill(ctx)
	})
}

// killTimeout bounds how long a killed service waits for what still runs
// in-process to stop.
const killTimeout = 10 * time.Second
