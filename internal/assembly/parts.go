package assembly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// A part is one long-lived piece of the service: the store, the actor
// system, the cluster, the consumers, the timers, the HTTP server. Build
// makes the parts in the order of the service's list (see build) and
// starts them in that order once setup has returned; Shutdown stops them
// in the reverse order, and so does a Build that fails with the parts it
// made. A kill (the test kit's) walks the same list: it cuts every
// part's links to the world first, then stops what still runs
// in-process, and says no goodbye.
type part struct {
	// name says what stops, in the log and in errors.
	name string
	// start lets the part work, once every part is built and setup has
	// run; nil: it works as built.
	start func(context.Context) error
	// stop ends the part gracefully within ctx; nil: nothing to stop.
	stop func(context.Context) error
	// cut, for a kill, severs the part's links to the world at once
	// (closes its listeners and connections) without a goodbye; nil: the
	// part has none, and a kill stops it (stop) once every part is cut.
	cut func()
	// farewell says stop is only a goodbye (a hand-over, a drain), which
	// a kill skips.
	farewell bool
}

// parts is the service's list, in the order the parts start.
type parts []part

// startAll starts the parts in order. When one fails, it returns its error
// and the caller stops them all (release).
func (ps parts) startAll(ctx context.Context) error {
	for _, p := range ps {
		if p.start == nil {
			continue
		}
		if err := p.start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", p.name, err)
		}
	}
	return nil
}

// stopAll stops the parts in the reverse order, each within ctx, and
// returns every failure.
func (ps parts) stopAll(ctx context.Context, log *slog.Logger) error {
	var errs []error
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		if p.stop == nil {
			continue
		}
		log.Info("shutting down: stopping " + p.name)
		if err := p.stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", p.name, err))
		}
	}
	return errors.Join(errs...)
}

// kill cuts every part in the reverse order, then stops (within ctx) the
// parts that have nothing to cut and no goodbye to say, in the reverse
// order too, so that no goroutine is left.
func (ps parts) kill(ctx context.Context) {
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].cut != nil {
			ps[i].cut()
		}
	}
	for i := len(ps) - 1; i >= 0; i-- {
		if p := ps[i]; p.cut == nil && !p.farewell && p.stop != nil {
			_ = p.stop(ctx)
		}
	}
}

// release stops the parts of a service that did not start, bounded by
// releaseTimeout.
func (ps parts) release(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = ps.stopAll(ctx, log)
}

// releaseTimeout bounds the release of a service that did not start.
const releaseTimeout = 10 * time.Second
