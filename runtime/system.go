package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"
)

// System runs actors: it owns the dispatcher's workers, the top-level
// actors, the receptionist, sharding regions and dead letters. Make one with
// [NewSystem] and end it with [System.Shutdown].
type System struct {
	name      string
	d         *dispatcher
	clock     clockwork.Clock
	log       *slog.Logger
	tracer    trace.Tracer // nil: tracing off
	user      *guardian
	reception receptionist
	dead      deadLetters
	ids       atomic.Uint64
	remoteState

	mu       sync.Mutex
	regions  map[string]region
	stopped  bool
	stopWait []<-chan struct{} // closed when the user actors, then each region, have stopped

	dispatchers    []*dispatcher // made by NewDispatcher
	workersStopped sync.Once     // the workers are stopped once, by the first Shutdown to see every actor stopped
}

// Option configures a System.
type Option func(*System)

// WithWorkers sets the number of worker goroutines (default GOMAXPROCS).
func WithWorkers(n int) Option {
	return func(s *System) {
		if n > 0 {
			s.d.workers = n
		}
	}
}

// WithThroughput sets how many messages a mailbox handles before it gives
// its worker to another waiting mailbox (default 5, as in Akka; 1 is the
// fairest, larger is faster under load).
func WithThroughput(n int) Option {
	return func(s *System) {
		if n > 0 {
			s.d.throughput = n
		}
	}
}

// WithClock sets the clock of timers, asks and passivation; tests pass a
// clockwork.FakeClock and advance it.
func WithClock(c clockwork.Clock) Option { return func(s *System) { s.clock = c } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *System) { s.log = l } }

// WithDeadLetterLogInterval sets how often dead letters are logged at most
// (default 1 s); in between they are only counted.
func WithDeadLetterLogInterval(d time.Duration) Option {
	return func(s *System) { s.dead.every = d }
}

// WithTracer sets the tracer the system's actors trace with, such as
// reliable delivery's controllers; nil (the default) turns their tracing
// off, at the cost of a nil check.
func WithTracer(tr trace.Tracer) Option { return func(s *System) { s.tracer = tr } }

// NewSystem starts an actor system: its workers run until Shutdown.
func NewSystem(name string, opts ...Option) *System {
	s := &System{
		name:    name,
		d:       newDispatcher(runtime.GOMAXPROCS(0), 5, true),
		clock:   clockwork.NewRealClock(),
		log:     slog.Default(),
		regions: make(map[string]region),
	}
	s.dead.every = time.Second
	for _, o := range opts {
		o(s)
	}
	s.log = s.log.With("system", name)
	s.user = newGuardian(s, "/user")
	s.reception.init()
	s.d.start()
	return s
}

// Name is the name given to NewSystem.
func (s *System) Name() string { return s.name }

// Clock is the system's clock.
func (s *System) Clock() clockwork.Clock { return s.clock }

// Logger is the system's logger.
func (s *System) Logger() *slog.Logger { return s.log }

// Tracer is the tracer of WithTracer: nil when tracing is off.
func (s *System) Tracer() trace.Tracer { return s.tracer }

// DeadLetters counts the messages that found no actor to handle them.
func (s *System) DeadLetters() uint64 { return s.dead.count.Load() }

// Stop stops the actor behind ref from outside any actor, such as a
// top-level actor from main. Inside an actor use Context.Stop, which keeps
// to the actor itself and its children. A ref that is not an actor is
// ignored.
func (s *System) Stop(ref AnyRef) {
	if t := ref.target(); t != nil {
		t.sendSystem(sysMsg{kind: sysStop})
	}
}

func (s *System) spawnParent() parent { return s.user }

// Shutdown stops every actor (children before their parents, each handling
// its Stopped signal), then the workers. It returns when all have stopped,
// or with ctx's error if ctx ends first; then actors stuck in a Receive
// still hold their workers, and the workers keep running until a later
// Shutdown sees every actor stopped. Any number of calls, concurrent or
// not, may be made: each waits for the same stop, which begins only once.
// Calling it from inside an actor waits for that very actor to stop, so it
// can only end with ctx.
func (s *System) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		s.stopWait = append(s.stopWait, s.user.stopAll())
		for _, r := range s.regions {
			s.stopWait = append(s.stopWait, r.stopAll())
		}
	}
	waits := s.stopWait
	s.mu.Unlock()
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("runtime: shutdown of system %q: %w", s.name, ctx.Err())
		}
	}
	// Every actor has stopped, so the workers only finish what they are
	// running: a concurrent call waits here until they are gone.
	s.workersStopped.Do(func() {
		s.mu.Lock()
		extra := s.dispatchers
		s.mu.Unlock()
		for _, d := range append(extra, s.d) {
			d.shutdown()
		}
	})
	return nil
}

// Spawner is where actors are spawned: a *System for top-level actors, or an
// actor's *Context for its children.
type Spawner interface{ spawnParent() parent }

// SpawnOption configures one actor.
type SpawnOption func(*spawnConfig)

type spawnConfig struct {
	super Supervision
	d     *Dispatcher
}

// WithDispatcher runs the actor's mailbox on d instead of the system's
// default dispatcher: give actors that block (on I/O, say) their own pool,
// so they cannot starve the others.
func WithDispatcher(d *Dispatcher) SpawnOption {
	return func(c *spawnConfig) { c.d = d }
}

// WithSupervision sets what happens when the actor's behavior panics
// (default [DefaultSupervision]).
func WithSupervision(s Supervision) SpawnOption {
	return func(c *spawnConfig) { c.super = s }
}

// Spawn starts an actor under on, named name (unique among its siblings;
// empty for a generated one), whose behavior newBehavior makes, now and on
// each restart. Spawn on a Context only from the actor's own goroutine.
func Spawn[T any](on Spawner, name string, newBehavior func() Behavior[T], opts ...SpawnOption) (Ref[T], error) {
	p := on.spawnParent()
	sys := p.system()
	if newBehavior == nil {
		return nil, fmt.Errorf("spawn %q under %s: the behavior factory is nil", name, p.path())
	}
	if strings.Contains(name, "/") || strings.HasPrefix(name, "$") {
		return nil, fmt.Errorf("spawn %q under %s: a name must not contain '/' nor start with '$'", name, p.path())
	}
	cfg := spawnConfig{super: DefaultSupervision}
	for _, o := range opts {
		o(&cfg)
	}
	c := newCell(sys, p, childName(sys, name), newBehavior, &cfg.super, cfg.d)
	if err := p.addChild(c.name, c); err != nil {
		return nil, err
	}
	c.start()
	return c, nil
}

// newCell builds an actor that is not yet registered with its parent.
func newCell[T any](sys *System, p parent, name string, newBehavior func() Behavior[T], super *Supervision, on *Dispatcher) *cell[T] {
	c := &cell[T]{sys: sys, d: sys.d, parent: p, name: name, factory: newBehavior, super: super}
	if on != nil {
		c.d = on.d
	}
	c.ctx.c = c
	c.setBehavior(newBehavior())
	if c.signals != nil {
		// Queued before the actor is registered, so Started comes before
		// a stop sent as soon as it is (by a concurrent Shutdown, say).
		c.sysq = append(c.sysq, sysMsg{kind: sysStart})
		c.sysLen.Store(1)
	}
	return c
}

// start runs the mailbox of a registered actor, for Started, unless mail
// has already got it running.
func (c *cell[T]) start() {
	c.mu.Lock()
	if c.scheduled || len(c.sysq) == 0 {
		c.mu.Unlock()
		return
	}
	c.scheduled = true
	c.mu.Unlock()
	c.d.schedule(c)
}

// region is a parent with many children that Shutdown stops as a whole.
type region interface {
	stopAll() <-chan struct{}
	stopLeaving(leaving func(entityType, id string) bool)
}

// guardian is the parent of top-level actors.
type guardian struct {
	sys      *System
	name     string
	mu       sync.Mutex
	children map[string]actorCell
	stopping bool
	done     chan struct{} // closed once stopping and no child is left
}

func newGuardian(sys *System, name string) *guardian {
	return &guardian{sys: sys, name: name, children: make(map[string]actorCell), done: make(chan struct{})}
}

func (g *guardian) path() string    { return g.name }
func (g *guardian) system() *System { return g.sys }

func (g *guardian) addChild(name string, child actorCell) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopping {
		return ErrSystemStopped
	}
	// A terminated holder frees the name before childStopped removes it:
	// its watchers hear of its end first.
	if holder, taken := g.children[name]; taken && !holder.terminated() {
		return nameTakenError(g.name, name)
	}
	g.children[name] = child
	return nil
}

func (g *guardian) childStopped(name string, child actorCell) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.children[name] == child {
		delete(g.children, name)
	}
	if g.stopping && len(g.children) == 0 {
		g.closeDone()
	}
}

func (g *guardian) closeDone() {
	select {
	case <-g.done:
	default:
		close(g.done)
	}
}

// stopAll stops every child and refuses new ones.
func (g *guardian) stopAll() <-chan struct{} {
	g.mu.Lock()
	g.stopping = true
	children := make([]actorCell, 0, len(g.children))
	for _, c := range g.children {
		children = append(children, c)
	}
	if len(children) == 0 {
		g.closeDone()
	}
	g.mu.Unlock()
	for _, c := range children {
		c.sendSystem(sysMsg{kind: sysStop})
	}
	return g.done
}

// deadLetters counts messages that found no actor and logs them at a
// bounded rate.
type deadLetters struct {
	every   time.Duration
	count   atomic.Uint64
	logged  atomic.Uint64 // count when last logged
	lastLog atomic.Int64  // unix nanos of the last log line
}

// deadLetter counts msg and logs it, unless one was logged less than the
// interval ago; it reports whether it logged.
func (s *System) deadLetter(to AnyRef, msg any) bool {
	n := s.dead.count.Add(1)
	now := s.clock.Now().UnixNano()
	last := s.dead.lastLog.Load()
	if now-last < int64(s.dead.every) || !s.dead.lastLog.CompareAndSwap(last, now) {
		return false
	}
	prev := s.dead.logged.Swap(n)
	s.log.Info("dead letter", "to", to.Path(), "type", fmt.Sprintf("%T", msg),
		"suppressed", n-prev-1, "total", n)
	return true
}
