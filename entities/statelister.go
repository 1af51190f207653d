package entities

import "context"

// StateLister is a [ChangeLog] that lists an entity type's current states
// of every shard in one pass, for a reader that needs them all (a view
// built on every shard at once) and would otherwise make a pass over the
// store's keys for each shard with [ChangeLog.Current]. [MemoryStore] and
// [ShardedRedisStore] are.
type StateLister interface {
	// StateIDs returns the ids of entityType's entities that have a
	// current state, of every shard, in one pass over the store's keys
	// (on Redis Cluster, one over each master's). An entity that has a
	// state for the whole listing is in it; one created or deleted during
	// it may or may not be.
	StateIDs(ctx context.Context, entityType string) ([]string, error)
	// States calls fn with the current state (Seq 0) of each of ids of
	// entityType, in the order of ids, reading them a batch at a time;
	// an id with no state (deleted since it was listed) is skipped.
	States(ctx context.Context, entityType string, ids []string, fn func(Change) error) error
}
