package cluster

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Hooks are the entity layer's say in a [Rebalancer]'s moves.
type Hooks struct {
	// BeforeRelease runs before the member gives shard up: it stops taking
	// new commands for the shard, finishes those that run and passivates
	// its entities. The member still serves the shard while it runs (its
	// writes still pass the fence). An error keeps the shard for now: it
	// is tried again at the next pass (or given up anyway by Leave). It
	// may run twice for one shard (a release whose answer was lost is
	// tried again), so it must be idempotent. Releases run one at a time.
	BeforeRelease func(ctx context.Context, shard int) error
	// OnServe, when set, is called as the member starts serving a shard:
	// acquired, or adopted again after a release whose answer was lost
	// (then with the epoch it had). Never with a lock held.
	OnServe func(Fence)
	// OnChange is called with every shard whose entry in the local table
	// changed, from the goroutine that changed it (the loop, or a caller
	// of Refresh), never with a lock held.
	OnChange func(Ownership)
	// OnMoved, when set, is called once a move of this member's own is
	// done: acquired is true after it acquired shard, false after it
	// released it (a pass's or Leave's). Adoptions and shards lost to a
	// lapsed lease are not moves. Never with a lock held.
	OnMoved func(shard int, acquired bool)
}

// Ownership is one entry of a Rebalancer's local table.
type Ownership struct {
	Shard int
	// Owner is the owning member's id, "" when the shard is free.
	Owner string
	// Addr is the owner's transport address; "" when the owner is not a
	// live member (the shard is about to be taken over).
	Addr  string
	Epoch uint64
}

// Rebalancer moves shards toward their preferred owners ([Assign] over the
// live members), one at a time: it releases the shards its member owns
// but is not preferred for (after Hooks.BeforeRelease), and acquires those
// it is preferred for once they are free or their owner is dead. It polls
// every Lease/3, at once after [Rebalancer.Trigger], and at once when
// another member announces a move (announce.go). Its local table
// answers [Rebalancer.Owner]; [Rebalancer.Serving] says whether its member
// may act for a shard now.
//
// It makes no moves while its member's lease is not valid, and none ever
// again once the membership is lost ([Member.Lost]): the service then
// joins again, with a new Member and a new Rebalancer.
type Rebalancer struct {
	m        *Member
	hooks    Hooks
	log      *slog.Logger
	interval time.Duration

	seen atomic.Int64 // live members at the last read, for metrics

	mu      sync.Mutex
	table   [NumShards]Ownership
	owned   map[int]Fence   // shards the member acts for while its lease is valid
	moving  [NumShards]bool // see Moving
	leaving bool            // no more acquisitions

	ctx       context.Context // cancelled by Shutdown
	cancel    context.CancelFunc
	kick      chan struct{}
	done      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
}

// NewRebalancer returns a Rebalancer for m; Start starts it.
func NewRebalancer(m *Member, hooks Hooks) *Rebalancer {
	ctx, cancel := context.WithCancel(context.Background())
	return &Rebalancer{
		m: m, hooks: hooks, log: m.log, interval: m.cfg.Lease / 3,
		owned: make(map[int]Fence),
		ctx:   ctx, cancel: cancel,
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// Start starts the rebalancing loop (once).
func (r *Rebalancer) Start() { r.startOnce.Do(func() { go r.run() }) }

// Shutdown stops the loop and waits for it. The shards stay owned: they
// are served until the member's lease runs out, and taken over after its
// key expires. To hand them over, use Leave.
func (r *Rebalancer) Shutdown() {
	r.stopOnce.Do(r.cancel)
	r.startOnce.Do(func() { close(r.done) }) // never started: nothing to wait for
	<-r.done
}

// Leave hands every owned shard over, one at a time (Hooks.BeforeRelease
// first), then leaves the membership. It first marks the member as
// leaving ([Member.Drain]), so that the others take each shard as soon as
// it is released. Errors are joined; the member leaves even if a release
// failed (its shards are then taken over at once, since its key is gone
// and it has stopped serving).
func (r *Rebalancer) Leave(ctx context.Context) error {
	r.mu.Lock()
	r.leaving = true
	r.mu.Unlock()
	r.Shutdown()
	errs := []error{r.m.Drain(ctx)}
	for _, s := range r.ownedShards() {
		errs = append(errs, r.release(ctx, s))
	}
	errs = append(errs, r.m.Leave(ctx))
	return errors.Join(errs...)
}

// MembersSeen is how many live members the last read of the membership
// found (0 before the first): what this instance believes the cluster
// is, without asking Redis.
func (r *Rebalancer) MembersSeen() int { return int(r.seen.Load()) }

// Trigger asks for a pass now (membership changed, a miss, a refusal).
func (r *Rebalancer) Trigger() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Owner returns shard's entry of the local table; ok is false when the
// shard has no live owner as far as the table knows, and then a refresh
// is triggered.
func (r *Rebalancer) Owner(shard int) (o Ownership, ok bool) {
	r.mu.Lock()
	o = r.table[shard]
	r.mu.Unlock()
	if o.Addr == "" {
		r.Trigger()
	}
	return o, o.Addr != ""
}

// Serving returns the Fence of shard and true if the member owns it and
// its lease is surely alive now: only then may it act for the shard.
func (r *Rebalancer) Serving(shard int) (Fence, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servingLocked(shard, r.m.cfg.Clock.Now())
}

// servingLocked is Serving at now, with r.mu held.
func (r *Rebalancer) servingLocked(shard int, now time.Time) (Fence, bool) {
	f, ok := r.owned[shard]
	return f, ok && r.m.lease.Valid(now)
}

// Moving reports whether shard is between this member's record and its
// serving: released but its record not yet freed (the others' tables still
// name this member), or its record being taken but not yet served. A
// command sent here meanwhile is to wait for the move to end, not be
// turned away to a table that would send it back. Hooks.OnMoved, or
// Hooks.OnChange, follows the end of a move that succeeded; a move that
// failed ends silently.
func (r *Rebalancer) Moving(shard int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.moving[shard]
}

// setMoving marks shard as moving, or no longer.
func (r *Rebalancer) setMoving(shard int, on bool) {
	r.mu.Lock()
	r.moving[shard] = on
	r.mu.Unlock()
}

// Refresh reads the members and every record and updates the local table
// (not the owned shards: only the loop changes those).
func (r *Rebalancer) Refresh(ctx context.Context) error {
	members, recs, err := r.read(ctx)
	if err != nil {
		return err
	}
	r.notify(r.updateTable(members, recs))
	return nil
}

// run passes at every tick or kick until Shutdown.
func (r *Rebalancer) run() {
	defer close(r.done)
	defer r.listen()()
	tick := r.m.cfg.Clock.NewTicker(r.interval)
	defer tick.Stop()
	for {
		r.pass(r.ctx)
		select {
		case <-r.ctx.Done():
			return
		case <-tick.Chan():
		case <-r.kick:
		case <-r.m.replaced: // a predecessor's shards are free now
		}
	}
}

// read lists the live members (by id) and reads every record.
func (r *Rebalancer) read(ctx context.Context) (map[string]MemberInfo, []Record, error) {
	list, err := r.m.Members(ctx)
	if err != nil {
		return nil, nil, err
	}
	recs, err := r.m.Records(ctx)
	if err != nil {
		return nil, nil, err
	}
	members := make(map[string]MemberInfo, len(list))
	for _, mi := range list {
		members[mi.ID] = mi
	}
	r.seen.Store(int64(len(members)))
	return members, recs, nil
}

// pass brings the table up to date, then makes the moves this member is
// due: releases first, then acquisitions, each one at a time.
//
// The read is bounded by the interval (at least a second): a connection
// that a network cut left dead in the client's pool costs that much, not
// the client's read timeout, and the tick that came meanwhile passes again at once,
// on another connection. A member that has just joined again after a
// cut must not keep the shards the others release to it unserved.
func (r *Rebalancer) pass(ctx context.Context) {
	readCtx, cancel := context.WithTimeout(ctx, max(r.interval, time.Second))
	members, recs, err := r.read(readCtx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("cluster: rebalance: read failed", "err", err.Error())
		}
		return
	}
	r.served(r.reconcileOwned(recs)...)
	r.notify(r.updateTable(members, recs))
	if me, listed := members[r.m.ID()]; !listed || me.Incarnation != r.m.inc || me.Leaving || !r.m.lease.Serving() {
		return // not surely a member, or leaving: make no moves
	}
	preferred := Assign(candidates(members))
	released, acquired := 0, 0
	for _, s := range r.ownedShards() {
		if preferred[s] != r.m.ID() && ctx.Err() == nil && r.release(ctx, s) == nil {
			released++
		}
	}
	for s, rec := range recs {
		if preferred[s] == r.m.ID() && ctx.Err() == nil && takeable(rec, members) && r.acquire(ctx, s) {
			acquired++
		}
	}
	if acquired > 0 {
		r.m.announce(ctx)
	}
	if released+acquired > 0 {
		r.log.Info("cluster: rebalanced", "released", released, "acquired", acquired,
			"owned", len(r.ownedShards()), "members", len(members))
	}
}

// candidates are the ids of the members that may be given shards: the
// live ones that are not leaving. This member is one (pass checked it).
func candidates(members map[string]MemberInfo) []string {
	var ids []string
	for id, mi := range members {
		if !mi.Leaving {
			ids = append(ids, id)
		}
	}
	return ids
}

// takeable: the record is free, or its owner's incarnation is not live.
func takeable(rec Record, members map[string]MemberInfo) bool {
	return rec.Free() || members[rec.Owner].Incarnation != rec.Incarnation
}

// updateTable sets the table from the records and returns the entries
// that changed.
func (r *Rebalancer) updateTable(members map[string]MemberInfo, recs []Record) []Ownership {
	r.mu.Lock()
	defer r.mu.Unlock()
	var changes []Ownership
	for s, rec := range recs {
		o := Ownership{Shard: s, Owner: rec.Owner, Epoch: rec.Epoch}
		if mi, ok := members[rec.Owner]; ok && !rec.Free() && mi.Incarnation == rec.Incarnation {
			o.Addr = mi.Addr
		}
		if o != r.table[s] {
			r.table[s] = o
			changes = append(changes, o)
		}
	}
	return changes
}

// reconcileOwned drops the owned shards whose record moved on (another
// member took them: this member's lease had run out) and adopts the
// records that name this incarnation but are not owned (a release whose
// answer was lost; the next pass releases them again if due). It returns
// the fences adopted.
func (r *Rebalancer) reconcileOwned(recs []Record) (adopted []Fence) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s, rec := range recs {
		f, owned := r.owned[s]
		mine := rec.Incarnation == r.m.inc
		switch {
		case owned && (!mine || rec.Epoch != f.Epoch):
			delete(r.owned, s)
			r.log.Warn("cluster: shard lost", "shard", s, "epoch", f.Epoch, "owner", rec.Owner, "owner_epoch", rec.Epoch)
		case !owned && mine && !r.leaving:
			r.owned[s] = Fence{Shard: s, Incarnation: r.m.inc, Epoch: rec.Epoch}
			adopted = append(adopted, r.owned[s])
			r.log.Info("cluster: shard adopted", "shard", s, "epoch", rec.Epoch)
		}
	}
	return adopted
}

// served calls OnServe with each fence (never with r.mu held).
func (r *Rebalancer) served(fences ...Fence) {
	if r.hooks.OnServe == nil {
		return
	}
	for _, f := range fences {
		r.hooks.OnServe(f)
	}
}

// ownedShards lists the owned shards in order.
func (r *Rebalancer) ownedShards() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.owned))
}

// release hands shard over: the hook, then stop serving it, then the
// compare-and-set that frees the record.
func (r *Rebalancer) release(ctx context.Context, shard int) error {
	r.mu.Lock()
	f, ok := r.owned[shard]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	if r.hooks.BeforeRelease != nil {
		if err := r.hooks.BeforeRelease(ctx, shard); err != nil {
			r.log.Warn("cluster: BeforeRelease refused; keeping the shard", "shard", shard, "err", err.Error())
			return err
		}
	}
	r.mu.Lock()
	delete(r.owned, shard) // stop serving before the record is free
	r.moving[shard] = true
	r.mu.Unlock()
	if err := r.m.Release(ctx, f); err != nil {
		r.setMoving(shard, false)
		r.log.Warn("cluster: release failed", "shard", shard, "epoch", f.Epoch, "err", err.Error())
		return err
	}
	r.log.Debug("cluster: shard released", "shard", shard, "epoch", f.Epoch)
	r.m.announce(ctx)
	changed := r.setEntry(Ownership{Shard: shard, Epoch: f.Epoch})
	r.setMoving(shard, false) // before the hooks, which wake the commands that wait for it
	r.moved(shard, false)
	r.notify(changed)
	return nil
}

// acquire takes shard and starts serving it; false if it could not.
func (r *Rebalancer) acquire(ctx context.Context, shard int) bool {
	r.setMoving(shard, true)
	f, err := r.m.Acquire(ctx, shard)
	if err != nil {
		r.setMoving(shard, false)
		if !errors.Is(err, ErrOwned) && !errors.Is(err, ErrChanged) && ctx.Err() == nil {
			r.log.Warn("cluster: acquire failed", "shard", shard, "err", err.Error())
		}
		return false
	}
	r.mu.Lock()
	r.owned[shard] = f
	r.moving[shard] = false
	r.mu.Unlock()
	r.served(f)
	r.log.Debug("cluster: shard acquired", "shard", shard, "epoch", f.Epoch)
	r.moved(shard, true)
	r.notify(r.setEntry(Ownership{Shard: shard, Owner: r.m.ID(), Addr: r.m.Addr(), Epoch: f.Epoch}))
	return true
}

// moved calls OnMoved (never with r.mu held).
func (r *Rebalancer) moved(shard int, acquired bool) {
	if r.hooks.OnMoved != nil {
		r.hooks.OnMoved(shard, acquired)
	}
}

// setEntry sets one table entry; it returns it if it changed.
func (r *Rebalancer) setEntry(o Ownership) []Ownership {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.table[o.Shard] == o {
		return nil
	}
	r.table[o.Shard] = o
	return []Ownership{o}
}

// notify calls OnChange for each change (never with r.mu held).
func (r *Rebalancer) notify(changes []Ownership) {
	if r.hooks.OnChange == nil {
		return
	}
	for _, o := range changes {
		r.hooks.OnChange(o)
	}
}
