package runtime

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellis-go/trellis/internal/deadlines"
)

// EntityTypeKey names a type of sharded entity whose actors handle T.
type EntityTypeKey[T any] struct{ name string }

// NewEntityTypeKey makes the key for the entity type name.
func NewEntityTypeKey[T any](name string) EntityTypeKey[T] { return EntityTypeKey[T]{name: name} }

// Name is the entity type's name.
func (k EntityTypeKey[T]) Name() string { return k.name }

// DefaultPassivateAfter is how long an entity may be idle before it is
// stopped, when Entity.PassivateAfter is zero.
const DefaultPassivateAfter = 2 * time.Minute

// Entity describes one type of sharded entity.
type Entity[T any] struct {
	Key EntityTypeKey[T]
	// Create makes the behavior of entity id: on its first message, on the
	// first message after it was passivated or stopped, and when it restarts
	// after a failure. It runs while the entity's shard is locked, so it
	// must only build the behavior: a Tell to an entity from it can deadlock.
	Create func(id string) Behavior[T]
	// PassivateAfter is how long an entity may go without a message before
	// it is stopped (zero: DefaultPassivateAfter; negative: never).
	PassivateAfter time.Duration
	// Supervision of each entity; nil is DefaultSupervision.
	Supervision *Supervision
	// Dispatcher runs the entities' mailboxes; nil is the system's default.
	// Entities that block on storage want one of their own.
	Dispatcher *Dispatcher
	// Local keeps every entity of the type on this system, whatever the
	// system's Placement: for a layer that routes to the owning instance
	// itself and hands each entity its messages there (package entities).
	Local bool
}

// PassivationGuard is implemented by an entity's behavior that can hold
// work passivation would lose: work handed to its child actors, say, that
// they have not finished. While HoldsPassivation reports true the entity is
// not passivated, however long it has been idle; its idle time is looked at
// again a PassivateAfter later, and any message it handles meanwhile starts
// it over. HoldsPassivation runs on the entity's goroutine, between its
// messages, so it may read the behavior's state.
type PassivationGuard interface {
	HoldsPassivation() bool
}

// Sharding runs the entities of one type on this system: each id is one
// actor, started by its first message, stopped when idle, started again by
// the next message. Messages to an entity that is being passivated wait and
// go to its next incarnation, so none is lost. An entity that stops itself
// (or is stopped by its supervision) is started again the same way by the
// messages sent after it began to stop; those already in its mailbox then
// are dead letters.
//
// With a [Placement] (a cluster instance's), the entities are spread over
// the instances, each on the one that owns it now, and every instance's
// Sharding of the type reaches every entity: see Placement for what
// crosses instances and what is lost on the way.
type Sharding[T any] struct {
	sys            *System
	key            EntityTypeKey[T]
	create         func(id string) Behavior[T]
	passivateAfter time.Duration
	super          *Supervision
	dispatcher     *Dispatcher
	local          bool // Entity.Local: the Placement is not asked
	shards         [shardCount]entityShard[T]
	idle           *deadlines.Book // the entities' idle watches (see idleWatch)
	closed         atomic.Bool
	live           atomic.Int64
	done           chan struct{}
	doneOnce       sync.Once
}

// shardCount spreads the entity map over this many locks.
const shardCount = 64

type entityShard[T any] struct {
	mu      sync.Mutex
	entries map[string]*entityEntry[T]
}

// entityEntry is one entity id: its running actor and, while that actor is
// being passivated, the messages for its next incarnation.
type entityEntry[T any] struct {
	cell     *cell[T]
	stopping bool
	buffer   []T
}

// InitSharding starts sharding for an entity type. Each type is
// initialised once per system.
func InitSharding[T any](sys *System, e Entity[T]) (*Sharding[T], error) {
	if e.Create == nil {
		return nil, fmt.Errorf("sharding %q: Entity.Create is nil", e.Key.name)
	}
	s := &Sharding[T]{
		sys:            sys,
		key:            e.Key,
		create:         e.Create,
		passivateAfter: e.PassivateAfter,
		super:          e.Supervision,
		dispatcher:     e.Dispatcher,
		local:          e.Local,
		done:           make(chan struct{}),
	}
	if s.passivateAfter == 0 {
		s.passivateAfter = DefaultPassivateAfter
	}
	if s.passivateAfter > 0 {
		s.idle = deadlines.New(sys.clock)
	}
	if s.super == nil {
		s.super = &DefaultSupervision
	}
	for i := range s.shards {
		s.shards[i].entries = make(map[string]*entityEntry[T])
	}
	sys.mu.Lock()
	defer sys.mu.Unlock()
	if sys.stopped {
		return nil, ErrSystemStopped
	}
	if _, ok := sys.regions[e.Key.name]; ok {
		return nil, fmt.Errorf("sharding %q: the entity type is already initialised", e.Key.name)
	}
	sys.regions[e.Key.name] = s
	if !s.local {
		sys.exposed.Store(s.path(), regionEndpoint[T]{s: s}) // for messages from other instances (Placement)
	}
	return s, nil
}

// EntityRef is the ref of entity id. It needs no running actor: the
// entity starts when a message arrives. It cannot be watched.
func (s *Sharding[T]) EntityRef(id string) Ref[T] { return &entityRef[T]{s: s, id: id} }

// Tell sends msg to entity id: EntityRef(id).Tell(msg) without making a ref.
func (s *Sharding[T]) Tell(id string, msg T) { s.send(id, msg, false) }

// Run is Tell for a caller that is about to wait for the entity's answer:
// when the entity's actor is here and idle, Run handles msg at once on
// the caller's goroutine and returns after it (mail that comes meanwhile
// is left to the dispatcher), which saves two hand-offs between
// goroutines: to a worker and back. Otherwise it is Tell. Order and
// one-at-a-time handling are kept, and a failure is the actor's, as
// always. For entities whose handlers do not block for long.
func (s *Sharding[T]) Run(id string, msg T) { s.send(id, msg, true) }

// Active is the number of entities with a running actor.
func (s *Sharding[T]) Active() int { return int(s.live.Load()) }

func (s *Sharding[T]) shard(id string) *entityShard[T] {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return &s.shards[h%shardCount]
}

func (s *Sharding[T]) path() string    { return regionPath(s.key.name) }
func (s *Sharding[T]) system() *System { return s.sys }

// addChild is a no-op: entities are registered by tell.
func (s *Sharding[T]) addChild(string, actorCell) error { return nil }

// send delivers msg to entity id: here, starting it when needed, or on
// the instance that owns it (see Placement). With run, an idle entity
// here handles it on the caller's goroutine.
func (s *Sharding[T]) send(id string, msg T, run bool) {
	if addr, here := s.where(id); !here {
		s.tellRemote(addr, id, 0, msg)
		return
	}
	s.tellHere(id, msg, run)
}

// where is the Placement's answer for entity id: always here for a Local
// type.
func (s *Sharding[T]) where(id string) (string, bool) {
	if s.local {
		return "", true
	}
	return s.sys.where(s.key.name, id)
}

// tellHere delivers msg to entity id on this system, starting it when
// needed; with run, an idle entity handles it on the caller's goroutine.
func (s *Sharding[T]) tellHere(id string, msg T, run bool) {
	sh := s.shard(id)
	sh.mu.Lock()
	if s.closed.Load() {
		sh.mu.Unlock()
		s.sys.deadLetter(&entityRef[T]{s: s, id: id}, msg)
		return
	}
	e := sh.entries[id]
	if e == nil {
		e = &entityEntry[T]{cell: s.startEntity(id)}
		sh.entries[id] = e
		s.live.Add(1)
	}
	claimed := e.send(msg, run)
	sh.mu.Unlock()
	if claimed != nil {
		claimed.runClaimed()
	}
}

// send queues msg for the entity's actor or, once that actor has begun to
// stop, for its next incarnation, which childStopped starts. With run, an
// idle actor's mailbox is claimed for the caller, who must run it
// (cell.runClaimed) once it lets go of the shard's lock, which it holds.
func (e *entityEntry[T]) send(msg T, run bool) (claimed *cell[T]) {
	how := wakeSchedule
	if run {
		how = wakeClaim
	}
	if !e.stopping {
		if ok, mine := e.cell.tellWaking(msg, how); ok {
			if mine {
				return e.cell
			}
			return nil
		}
	}
	// Passivating, or the actor stopped itself: cell.Tell would make msg a
	// dead letter.
	e.stopping = true
	e.buffer = append(e.buffer, msg)
	return nil
}

func (s *Sharding[T]) startEntity(id string) *cell[T] {
	c := newCell(s.sys, s, id, func() Behavior[T] { return s.create(id) }, s.super, s.dispatcher)
	if s.passivateAfter > 0 {
		w := &idleWatch{c: c, book: s.idle, after: s.passivateAfter, last: s.sys.clock.Now(), passivate: func() bool { return s.passivate(id, c) }}
		c.ext().idle = w
		w.arm(s.passivateAfter)
	}
	c.start()
	return c
}

// passivate stops entity c if its mailbox is empty; from now until it has
// stopped, its messages are kept for the next incarnation. It runs on c's
// goroutine.
func (s *Sharding[T]) passivate(id string, c *cell[T]) bool {
	sh := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[id]
	if e == nil || e.cell != c || e.stopping {
		return false
	}
	c.mu.Lock()
	empty := len(c.inbox) == 0
	c.mu.Unlock()
	if !empty || c.next < len(c.batch) || (c.x.unext < len(c.x.unstashed)) || c.hasHeld() {
		return false
	}
	e.stopping = true
	c.stopSelf = true
	return true
}

// childStopped starts the next incarnation when messages are waiting for it.
func (s *Sharding[T]) childStopped(id string, child actorCell) {
	sh := s.shard(id)
	sh.mu.Lock()
	e := sh.entries[id]
	if e == nil || actorCell(e.cell) != child {
		sh.mu.Unlock()
		return
	}
	addr, here := s.where(id)
	if len(e.buffer) > 0 && !s.closed.Load() && !here {
		// The entity left this instance while it was stopping: what waited
		// for its next incarnation goes to the new owner.
		delete(sh.entries, id)
		buffered := e.buffer
		sh.mu.Unlock()
		for _, msg := range buffered {
			s.tellRemote(addr, id, maxHops-1, msg)
		}
		s.entityGone()
		return
	}
	if len(e.buffer) > 0 && !s.closed.Load() {
		buffered := e.buffer
		e.cell, e.stopping, e.buffer = s.startEntity(id), false, nil
		for _, msg := range buffered {
			e.send(msg, false) // the new actor may stop itself in Started already
		}
		sh.mu.Unlock()
		return
	}
	delete(sh.entries, id)
	buffered := e.buffer
	sh.mu.Unlock()
	for _, msg := range buffered {
		s.sys.deadLetter(&entityRef[T]{s: s, id: id}, msg)
	}
	s.entityGone()
}

// entityGone counts an entity that stopped for good.
func (s *Sharding[T]) entityGone() {
	if s.live.Add(-1) == 0 && s.closed.Load() {
		s.finish()
	}
}

// finish marks the type done once its last entity has stopped after
// stopAll: its idle watches' timer is stopped too.
func (s *Sharding[T]) finish() {
	s.doneOnce.Do(func() {
		if s.idle != nil {
			s.idle.Abandon()
		}
		close(s.done)
	})
}

// stopAll stops every entity and refuses new messages.
func (s *Sharding[T]) stopAll() <-chan struct{} {
	s.closed.Store(true)
	var running []*cell[T]
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, e := range sh.entries {
			running = append(running, e.cell)
		}
		sh.mu.Unlock()
	}
	if s.live.Load() == 0 {
		s.finish()
	}
	for _, c := range running {
		c.sendSystem(sysMsg{kind: sysStop})
	}
	return s.done
}

type entityRef[T any] struct {
	s  *Sharding[T]
	id string
}

func (r *entityRef[T]) Tell(msg T)        { r.s.send(r.id, msg, false) }
func (r *entityRef[T]) Path() string      { return r.s.path() + "/" + r.id }
func (r *entityRef[T]) target() actorCell { return nil }

// idleWatch passivates an entity that has had no message for a while. Its
// lapses are kept in its Sharding's book (one clock timer for every entity
// of the type, not one each: an instance may hold many thousands).
type idleWatch struct {
	c         actorCell
	book      *deadlines.Book
	after     time.Duration
	last      time.Time  // when the entity last handled a message
	lapse     *idleLapse // the look armed last
	passivate func() bool
}

func (w *idleWatch) touch(now time.Time) { w.last = now }

// arm has the entity look at its idle time in d. It runs on the entity's
// goroutine (or before it starts), as stop does.
func (w *idleWatch) arm(d time.Duration) {
	w.lapse = &idleLapse{c: w.c}
	w.book.Add(w.lapse, d)
}

// idleLapse is one armed look of an idle watch, in its book.
type idleLapse struct {
	deadlines.Entry // Done: it fired, or the entity stopped
	c               actorCell
}

func (l *idleLapse) BookEntry() *deadlines.Entry { return &l.Entry }

// Expire sends the entity its look, unless the watch was stopped.
func (l *idleLapse) Expire() {
	if l.Done.CompareAndSwap(false, true) {
		l.c.sendSystem(sysMsg{kind: sysIdle})
	}
}

// stop cancels the watch when the entity stops. cancelAllTimers calls it
// too when a failed incarnation is restarted, but the watch belongs to the
// entity, not to one incarnation of its behavior: while the actor is alive
// it keeps running, or a restarted entity would never be passivated.
func (w *idleWatch) stop() {
	if w.lapse != nil && !w.c.isAlive() {
		w.lapse.Done.Store(true)
	}
}

// idleCheck passivates the entity if it has been idle long enough, or looks
// again when it would have been.
func (c *cell[T]) idleCheck() {
	w := c.x.idle
	if w == nil || c.state != alive {
		return
	}
	idle := c.sys.clock.Since(w.last)
	if idle >= w.after {
		if g, ok := c.behavior.(PassivationGuard); ok && g.HoldsPassivation() {
			w.arm(w.after)
			return
		}
		if w.passivate() {
			return
		}
	}
	w.arm(max(w.after-idle, time.Millisecond))
}
