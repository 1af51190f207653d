package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
)

// eachRecord calls fn with the stored record of every instance of the
// shards (each once), read from one listing of the type's states shared
// by all of them (listing.States: on Redis, one SCAN for all the shards
// instead of one per shard), begun after the call. An instance stored for
// the whole read is in it; one created or deleted during it may or may
// not be. A record that does not decode is given to bad, and skipped.
func (r *Running[S]) eachRecord(ctx context.Context, shards []int, fn func(shard int, id string, rec record) error,
	bad func(id string, err error) error) error {
	since := time.Now()
	for _, shard := range shards {
		err := r.listings.States(ctx, r.changes, shard, r.t.id, since, func(c entities.Change) error {
			var rec record
			if err := json.Unmarshal(c.Data, &rec); err != nil {
				return bad(c.EntityID, fmt.Errorf("workflow %s/%s: the stored record does not decode: %w", r.t.id, c.EntityID, err))
			}
			return fn(shard, c.EntityID, rec)
		})
		if err != nil {
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
