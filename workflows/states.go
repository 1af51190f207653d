package workflows

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
)

// eachRecord calls fn with the stored record of every instance of the
// shards (sorted, each once): in one listing of the type's states when
// the store lists every shard in one pass (an [entities.StateLister]: on
// Redis, one SCAN for all the shards instead of one per shard), else
// shard by shard with [entities.ChangeLog.Current]. An instance stored for
// the whole read is in it; one created or deleted during it may or may
// not be. A record that does not decode is given to bad, and skipped.
func (r *Running[S]) eachRecord(ctx context.Context, shards []int, fn func(shard int, id string, rec record) error,
	bad func(id string, err error) error) error {
	visit := func(shard int) func(entities.Change) error {
		return func(c entities.Change) error {
			var rec record
			if err := json.Unmarshal(c.Data, &rec); err != nil {
				return bad(c.EntityID, fmt.Errorf("workflow %s/%s: the stored record does not decode: %w", r.t.id, c.EntityID, err))
			}
			return fn(shard, c.EntityID, rec)
		}
	}
	lister, ok := r.changes.(entities.StateLister)
	if !ok || len(shards) == 1 {
		for _, shard := range shards {
			if err := r.changes.Current(ctx, shard, r.t.id, visit(shard)); err != nil {
				return err
			}
		}
		return nil
	}
	ids, err := lister.StateIDs(ctx, r.t.id)
	if err != nil {
		return err
	}
	var wanted [cluster.NumShards]bool
	for _, shard := range shards {
		wanted[shard] = true
	}
	byShard := make(map[int][]string, len(shards))
	for _, id := range ids {
		if shard := cluster.ShardOf(r.t.id, id); wanted[shard] {
			byShard[shard] = append(byShard[shard], id)
		}
	}
	for _, shard := range shards {
		if err := lister.States(ctx, r.t.id, byShard[shard], visit(shard)); err != nil {
			return err
		}
	}
	return nil
}

// allShards is every shard, in order.
var allShards = func() []int {
	s := make([]int, cluster.NumShards)
	for i := range s {
		s[i] = i
	}
	return s
}()
