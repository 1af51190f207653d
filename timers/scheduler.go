package timers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/tracing"
)

// Dispatcher runs a timer's deferred call: *components.Client is the one a
// service uses; tests substitute their own.
type Dispatcher interface {
	Dispatch(ctx context.Context, call components.DeferredCall) (json.RawMessage, error)
}

var _ Dispatcher = (*components.Client)(nil)

// Scheduler creates, deletes and inspects timers in a [Store], and (once
// started) runs the timers that fall due. One per server instance; it is
// safe for concurrent use, so endpoints, timed actions and entity callers
// share it. Several schedulers (instances) on one Redis store share its
// timers: each due timer is run by one of them.
//
// Create, Delete, Get, List and Stats work whether or not the scheduler
// was started: an instance that only schedules need not run timers.
type Scheduler struct {
	store   Store
	disp    Dispatcher
	cfg     Config
	clk     clockwork.Clock
	log     *slog.Logger
	metrics *metrics
	// tracer is the dispatcher's (a components.Client's); nil: tracing
	// is off.
	tracer trace.Tracer

	mu    sync.Mutex
	loop  *loop   // nil when not running
	retry retrier // the background starts of StartRetrying
	// imports are the import jobs running here (StartImport).
	imports importJobs

	wiped      atomic.Pointer[WipedError]
	wipeLogged atomic.Int64 // UnixNano of the last wipe log line, on clk
	// acks counts AcknowledgeWipe calls: a claim that started before the
	// last one may have seen the markers missing that it wrote again, and
	// must not report that wipe anew.
	acks atomic.Int64
}

// New returns a scheduler over store that runs calls with d. It does not
// start running timers: call Start.
func New(store Store, d Dispatcher, cfg Config) (*Scheduler, error) {
	if store == nil || d == nil {
		return nil, errors.New("timers.New: nil store or dispatcher")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Scheduler{store: store, disp: d, cfg: cfg, clk: store.clock(), log: cfg.Logger.With("component", "timers")}
	s.metrics = newMetrics(s)
	if t, ok := d.(interface{ Tracer() trace.Tracer }); ok {
		s.tracer = t.Tracer()
	}
	return s, nil
}

// CreateOption adjusts one Create.
type CreateOption func(*createOptions)

type createOptions struct {
	maxRetries    int
	keepIdentical bool // CreateRecurring only: see KeepIdentical
}

// WithMaxRetries bounds how many times a failed call is retried: after
// the call failed 1+n times the timer is removed, logged and counted as
// given up. 0 (the default) retries forever.
func WithMaxRetries(n int) CreateOption { return func(o *createOptions) { o.maxRetries = n } }

// Create schedules call to run delay from now under name, replacing (in
// one atomic step) any timer of that name: its pending run, its attempts
// and its error are gone, and a call of it still in flight can no longer
// remove or reschedule the new one. It fails with a *LimitError when the
// argument is larger than MaxPayload bytes or the store already holds
// MaxActive timers (a replacement does not count twice), and with
// ErrInvalid for an empty name, a negative delay or an invalid call.
func (s *Scheduler) Create(ctx context.Context, name string, delay time.Duration, call components.DeferredCall, opts ...CreateOption) (Timer, error) {
	var o createOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := s.check(name, delay, call, o); err != nil {
		return Timer{}, fmt.Errorf("create timer %q: %w", name, err)
	}
	ctx, span := tracing.StartTimer(ctx, s.tracer, "timer create", name)
	t, err := s.store.create(ctx, createRequest{
		name: name, delay: delay, call: call, maxRetries: o.maxRetries, maxActive: s.cfg.MaxActive,
		traceCtx: tracing.CaptureForLink(ctx),
	})
	tracing.End(span, components.ErrorType(err))
	if err != nil {
		return Timer{}, fmt.Errorf("create timer %q: %w", name, err)
	}
	s.noteCreated(s.clk.Now().Add(delay))
	return t, nil
}

// noteCreated counts a created timer and wakes the loop if it is due
// before the loop would wake.
func (s *Scheduler) noteCreated(due time.Time) {
	s.metrics.created.Inc()
	if l := s.currentLoop(); l != nil {
		l.noteDue(due)
	}
}

// check applies the limits that depend only on the request.
func (s *Scheduler) check(name string, delay time.Duration, call components.DeferredCall, o createOptions) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalid)
	case len(name) > s.cfg.MaxNameLen:
		return &LimitError{Limit: LimitName, Value: len(name), Max: s.cfg.MaxNameLen}
	case delay < 0:
		return fmt.Errorf("%w: negative delay %v", ErrInvalid, delay)
	case o.maxRetries < 0:
		return fmt.Errorf("%w: negative maxRetries %d", ErrInvalid, o.maxRetries)
	case len(call.Argument) > s.cfg.MaxPayload:
		return &LimitError{Limit: LimitPayload, Value: len(call.Argument), Max: s.cfg.MaxPayload}
	}
	if err := call.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Delete removes the timer called name. A missing timer is not an error
// (it may have run already). A call of it in flight is not stopped, but
// its outcome no longer changes anything.
func (s *Scheduler) Delete(ctx context.Context, name string) error {
	ctx, span := tracing.StartTimer(ctx, s.tracer, "timer delete", name)
	err := s.store.remove(ctx, name)
	tracing.End(span, components.ErrorType(err))
	if err != nil {
		return fmt.Errorf("delete timer %q: %w", name, err)
	}
	s.metrics.deleted.Inc()
	return nil
}

// Get returns the timer called name, or an error wrapping ErrNotFound.
func (s *Scheduler) Get(ctx context.Context, name string) (Timer, error) {
	t, err := s.store.get(ctx, name)
	if err != nil {
		return Timer{}, fmt.Errorf("get timer %q: %w", name, err)
	}
	return t, nil
}

// List returns one page of the timers that match q; see [Page] for the
// order and the guarantees of a walk. A bad limit or cursor is an error
// wrapping ErrInvalidQuery.
func (s *Scheduler) List(ctx context.Context, q ListQuery) (Page, error) {
	lq, err := q.validate()
	if err != nil {
		return Page{}, fmt.Errorf("list timers: %w", err)
	}
	p, err := s.store.list(ctx, lq)
	if err != nil {
		return Page{}, fmt.Errorf("list timers: %w", err)
	}
	return p, nil
}

// Stats returns the store-wide counts.
func (s *Scheduler) Stats(ctx context.Context) (Stats, error) {
	st, err := s.store.stats(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("timer stats: %w", err)
	}
	return Stats{Active: st.active, Failing: st.failing, Limit: s.cfg.MaxActive, DueWithin1m: st.dueWithin1m, DeadLetters: st.dead}, nil
}

// Ready reports whether this instance runs timers properly, for /readyz:
// nil when it is started and its store answers; an error wrapping
// ErrNotStarted, a *WipedError once the store was found wiped (until
// AcknowledgeWipe), or the store's error otherwise.
func (s *Scheduler) Ready(ctx context.Context) error {
	s.mu.Lock()
	running := s.loop != nil
	s.mu.Unlock()
	if !running {
		return fmt.Errorf("timers: %w", ErrNotStarted)
	}
	if w := s.wiped.Load(); w != nil {
		return w
	}
	if err := s.store.ping(ctx); err != nil {
		return fmt.Errorf("timers: store unreachable: %w", err)
	}
	return nil
}

// AcknowledgeWipe is the operator saying "yes, the timers are lost": it
// writes the marker again and clears the wiped state of this instance
// (other instances that noticed keep reporting until acknowledged or
// restarted). Until then a wiped store keeps Ready failing; the
// scheduler does run the timers created since, which are intact.
func (s *Scheduler) AcknowledgeWipe(ctx context.Context) error {
	if err := s.store.resetMarker(ctx); err != nil {
		return fmt.Errorf("acknowledge wipe: %w", err)
	}
	s.acks.Add(1)
	s.wiped.Store(nil)
	s.metrics.wiped.Set(0)
	s.log.Warn("timer store wipe acknowledged; the marker is written again")
	return nil
}

// noteWiped records and reports a wiped store (the markers that are
// gone), seen by a claim that started when acks was ackSeen: at once, then
// once a minute while it lasts, at error level. Both are on the scheduler's
// clock, like every other time it keeps.
func (s *Scheduler) noteWiped(markers []string, ackSeen int64) {
	if ackSeen != s.acks.Load() {
		return // acknowledged since the claim looked
	}
	now := s.clk.Now()
	if s.wiped.Load() == nil {
		s.wiped.CompareAndSwap(nil, &WipedError{Marker: strings.Join(markers, ", "), DetectedAt: now})
		s.metrics.wiped.Set(1)
	}
	last := s.wipeLogged.Load()
	if now.UnixNano()-last >= int64(time.Minute) && s.wipeLogged.CompareAndSwap(last, now.UnixNano()) {
		s.log.Error("TIMER STORE WIPED: every timer stored before this moment is lost; "+
			"the store was flushed or restarted without persistence. /readyz fails until acknowledged "+
			"(POST /admin/timers/wipe/acknowledge, or Scheduler.AcknowledgeWipe)",
			"err", s.wiped.Load())
	}
}

// Collector returns the scheduler's Prometheus metrics (trellis_timers_…)
// for a registry: reg.MustRegister(s.Collector()).
func (s *Scheduler) Collector() prometheus.Collector { return s.metrics }

// Start opens the store (writing its marker for wipe detection) and
// starts this instance's loop and call workers. It fails if the scheduler
// is running already.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loop != nil {
		return errors.New("timers: Start: the scheduler is running already")
	}
	missing, err := s.store.open(ctx)
	if err != nil {
		return fmt.Errorf("timers: start: %w", err)
	}
	if len(missing) > 0 {
		s.log.Warn("timer store had no marker: it is new, or it was wiped while no instance was running "+
			"(then the timers stored before are lost); on a cluster, only the partitions named lost theirs",
			"markers", missing)
	}
	l, err := startLoop(s)
	if err != nil {
		return fmt.Errorf("timers: start: %w", err)
	}
	s.loop = l
	return nil
}

// Shutdown stops running timers, in this order: the loop stops claiming;
// timers claimed but not yet started are released (due again at once, for
// any instance); calls in flight are waited for until ctx is done, then
// cancelled and released; the outcomes are written to the store; the
// wake-up subscription is closed. No goroutine of the scheduler is left.
// It returns ctx's error if calls had to be cancelled. Import jobs
// (StartImport) are stopped first, each recorded as interrupted. Shutting
// down a scheduler that is not running does nothing else but stop the
// retries of StartRetrying.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.stopRetrying()
	importsErr := s.stopImports(ctx)
	s.mu.Lock()
	l := s.loop
	s.loop = nil
	s.mu.Unlock()
	if l == nil {
		return importsErr
	}
	return errors.Join(l.shutdown(ctx), importsErr)
}
