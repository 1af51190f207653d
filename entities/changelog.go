package entities

import (
	"context"
	"time"
)

// ChangeLog is a store's record of its committed writes, one log per
// shard ([cluster.ShardOf]), for consumers (package consumers) to act on
// every change of an entity type at least once.
//
// A write appends its change in the same atomic step as the state (the
// same Lua script on Redis, under the same lock in memory), so there is
// no write whose change is not recorded and no recorded change whose
// write did not happen. Changes are numbered per shard from 1 with no
// gap: a change's Seq is its position in its shard's log.
//
// A shard records changes only once a consumer has registered there
// ([ChangeLog.Register]): a store with no consumer writes no log at all.
// The log is trimmed to the slowest registered consumer's checkpoint each
// time a checkpoint is saved, and bounded: it keeps about the last
// [DefaultChangeLogLimit] changes of each shard (the limit is
// approximate on Redis: MAXLEN ~), whatever the checkpoints. A consumer
// whose checkpoint falls behind the bound reads with missed set: the
// changes between its checkpoint and the oldest kept are gone, and it
// catches up from the current states ([ChangeLog.Current]).
//
// [MemoryStore] and [ShardedRedisStore] keep one; [RedisStore] does not
// (its entities are in no shard's slot).
type ChangeLog interface {
	// Register makes consumer known on shard, if it is not already: its
	// checkpoint starts at the shard's last change, and from then on the
	// shard records its changes. It returns the consumer's checkpoint.
	Register(ctx context.Context, consumer string, shard int) (uint64, error)
	// Checkpoint is consumer's checkpoint on shard: every change up to it
	// was handled. ok is false when the consumer is not registered there.
	Checkpoint(ctx context.Context, consumer string, shard int) (seq uint64, ok bool, err error)
	// SaveCheckpoint sets consumer's checkpoint on shard to seq, under f
	// (a [FencedStore] refuses with ErrFenced when f is no longer the
	// shard's; MemoryStore takes no fence), and trims the log up to the
	// lowest checkpoint of the shard.
	SaveCheckpoint(ctx context.Context, f Fence, consumer string, shard int, seq uint64) error
	// Changes returns up to limit changes of shard after seq after, in
	// order, and the shard's last change (its head). missed is true when
	// changes after after are gone from the log (trimmed by the bound).
	Changes(ctx context.Context, shard int, after uint64, limit int) (changes []Change, head uint64, missed bool, err error)
	// Current calls fn with the current state of every entity of
	// entityType in shard (Seq 0), for a consumer that missed changes.
	Current(ctx context.Context, shard int, entityType string, fn func(Change) error) error
	// Watch calls fn with every change this store value records, as the
	// log holds it, and its shard, after the write committed (a write
	// whose reply is lost is not heard: read the log for it). Calls for
	// one shard may come out of Seq order when writes to it run
	// concurrently. fn must not block, nor modify c.Data. stop ends the
	// calls.
	Watch(fn func(shard int, c Change)) (stop func())
}

// Change is one committed write of an entity, as a ChangeLog keeps it.
type Change struct {
	// Seq is the change's position in its shard's log (0 for a current
	// state read by ChangeLog.Current).
	Seq        uint64
	EntityType string
	EntityID   string
	// Revision is the state's revision; for a delete, the revision of the
	// state it deleted.
	Revision uint64
	// Deleted is true for a delete; Data is then nil.
	Deleted bool
	Data    []byte
	// At is when the change was recorded (the store's clock: Redis's TIME,
	// or the process's clock in memory); zero for a current state.
	At time.Time
	// TraceContext is the W3C trace context of the write (the entity's
	// store span, in tracing.Capture's form), which the consumer's
	// handling links to; "" when the write was not traced (or not
	// sampled), and for a current state.
	TraceContext string
}

// DefaultChangeLogLimit is about how many changes a shard's log keeps at
// most: 256 shards of 1,000 changes, 256,000 changes in all, each its
// state plus about 100 bytes.
const DefaultChangeLogLimit = 1000
