// Package placement places the sharded entities of a runtime
// System (runtime.Sharding) by the cluster's shard ownership
// (internal/cluster): an entity runs on the instance that serves its shard
// ([cluster.ShardOf] of the entity type and id), and its messages from
// every other instance go there over the transport. It is the
// runtime.Placement of a cluster instance; the service wires it (the root
// package's cluster node), and so do tests (internal/testkit/remotetest).
package placement

import (
	"context"
	"sync"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/runtime"
)

// Table is what the placement reads of the cluster's ownership: a
// cluster.Rebalancer, or anything that follows the rebalancer of the
// instance's membership of the moment.
type Table interface {
	// Serving returns the fence of shard and true while this instance may
	// act for it.
	Serving(shard int) (cluster.Fence, bool)
	// Owner is the local table's entry of shard; false when it knows no
	// live owner.
	Owner(shard int) (cluster.Ownership, bool)
}

// Placement is a runtime.Placement over a Table. Its BeforeRelease must
// run before the instance releases a shard (cluster.Hooks.BeforeRelease),
// so that the shard's entities stop here first, and its Serve as it
// starts serving one (cluster.Hooks.OnServe).
type Placement struct {
	table Table
	self  string // this instance's transport address
	sys   *runtime.System

	mu sync.RWMutex
	// releasing holds the shards being handed over, by the epoch of the
	// fence they were served with: from BeforeRelease on, their entities
	// are not here, until Serve (a release that failed, the shard
	// adopted again with the same epoch) or a new epoch (acquired again).
	releasing map[int]uint64
}

var _ runtime.Placement = (*Placement)(nil)

// New returns the placement of sys's entities by table; self is the
// address at which the others reach this instance. It takes effect once
// linked in (runtime.Link's Placement, System.Connect).
func New(sys *runtime.System, table Table, self string) *Placement {
	return &Placement{table: table, self: self, sys: sys, releasing: make(map[int]uint64)}
}

// Where implements runtime.Placement: here while this instance serves the
// entity's shard (and is not handing it over), else the owner the local
// table names ("" when none is live, or when the table still names this
// instance, which no longer serves the shard: a stale entry, until the
// rebalancer's next read of the records).
func (p *Placement) Where(entityType, id string) (string, bool) {
	shard := cluster.ShardOf(entityType, id)
	if f, ok := p.table.Serving(shard); ok && !p.isReleasing(shard, f.Epoch) {
		return "", true
	}
	o, ok := p.table.Owner(shard)
	if !ok || o.Addr == p.self {
		return "", false
	}
	return o.Addr, false
}

func (p *Placement) isReleasing(shard int, epoch uint64) bool {
	p.mu.RLock()
	e, ok := p.releasing[shard]
	p.mu.RUnlock()
	return ok && e == epoch
}

// BeforeRelease is the part of the release hook that moves entities: from
// now on the shard's entities are not here (their messages go to the
// table's owner, or are dead letters until there is one), and those that
// run here are stopped. It is idempotent; ctx is not used (stopping does
// not wait).
func (p *Placement) BeforeRelease(_ context.Context, shard int) {
	f, ok := p.table.Serving(shard)
	if !ok {
		return // not served here: nothing runs here for it
	}
	p.mu.Lock()
	p.releasing[shard] = f.Epoch
	p.mu.Unlock()
	p.sys.EntitiesLeaving(func(entityType, id string) bool { return cluster.ShardOf(entityType, id) == shard })
}

// Serve is the hook of a shard this instance starts serving: its entities
// are here again, even with the epoch of a release that did not happen
// (its answer was lost, and the shard was adopted again).
func (p *Placement) Serve(f cluster.Fence) {
	p.mu.Lock()
	delete(p.releasing, f.Shard)
	p.mu.Unlock()
}
