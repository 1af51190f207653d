package eventsourced

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-go/trellis/components"
)

// DefaultSweepEvery is how often a Sweeper walks the journals unless
// SweeperOptions.Every says otherwise.
const DefaultSweepEvery = time.Hour

// SweeperOptions configure a Sweeper.
type SweeperOptions struct {
	// Registry holds the service's components: the sweeper walks the
	// event-sourced types started in it that have a retention
	// (DropCoveredAfter). Required.
	Registry *components.Registry
	// Clock times the sweeps; nil: the real clock. A snapshot's age is
	// measured by its type's own clock (its Host.System's).
	Clock clockwork.Clock
	// Every is the time between two sweeps; 0: DefaultSweepEvery.
	Every time.Duration
	// Logger gets a sweep's failures; nil: slog.Default().
	Logger *slog.Logger
}

// Sweeper drops, in the background, the events that their type's
// retention lets go: those an entity's snapshot covers once that snapshot
// is older than the period, whether the entity is written again or not
// (a write drops them too). Every Every it walks each started type's
// journals and, for the entities whose shard this instance serves (all of
// them without a cluster), trims under the shard's fence: a deposed
// owner trims nothing, and a trim that meets a write made meanwhile
// writes nothing (the next sweep trims). A deleted entity's journal is
// kept whole. The events it dropped are counted in the series
// trellis_eventsourced_trimmed_events_total (Collector).
type Sweeper struct {
	o       SweeperOptions
	trimmed *prometheus.CounterVec

	mu     sync.Mutex
	cancel context.CancelFunc // nil: not running
	done   chan struct{}
}

// NewSweeper returns a Sweeper of the types started in o.Registry; it
// sweeps once started (Start).
func NewSweeper(o SweeperOptions) *Sweeper {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Every <= 0 {
		o.Every = DefaultSweepEvery
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Sweeper{o: o, trimmed: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_eventsourced_trimmed_events_total",
		Help: "Journal events dropped by this instance's retention sweeps, by event-sourced entity type.",
	}, []string{"entity_type"})}
}

// Collector is the sweeper's series, for the service's /metrics.
func (s *Sweeper) Collector() prometheus.Collector { return s.trimmed }

// Start starts sweeping, every Every from now; a second Start does
// nothing.
func (s *Sweeper) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go s.loop(ctx, s.done)
	return nil
}

// Shutdown stops sweeping: a sweep under way stops at its next entity.
// It returns once the sweeper stopped, or with ctx's error.
func (s *Sweeper) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel = nil
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Sweeper) loop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		timer := s.o.Clock.NewTimer(s.o.Every)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.Chan():
		}
		s.sweep(ctx)
	}
}

// sweep walks every started type with a retention once.
func (s *Sweeper) sweep(ctx context.Context) {
	for _, c := range s.o.Registry.Components() {
		j, ok := c.(journalSweep)
		if !ok {
			continue
		}
		err := j.sweepJournals(ctx, func(n int) { s.trimmed.WithLabelValues(c.ComponentID()).Add(float64(n)) })
		if err != nil && !errors.Is(err, context.Canceled) {
			s.o.Logger.Warn("eventsourced: sweep the journals", "entityType", c.ComponentID(), "err", err)
		}
	}
}

// journalSweep is a started type (*Running) the sweeper trims.
type journalSweep interface {
	// sweepJournals trims the journals of the entities this instance
	// serves, calling trimmed with the events each trim dropped.
	sweepJournals(ctx context.Context, trimmed func(n int)) error
}
