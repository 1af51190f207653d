package views

import (
	"context"
	"sync"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
)

// listings shares the listings of an entity type's ids (of its current
// states, or of its journals) among the shards' builds: a listing walks
// the store's keys, and the projectors of a view new on every shard would
// each make their own. A listing is made once, bucketed by shard. A build
// may take a listing only if it began after the build read its position
// (an entity first written before that position is in it), so a listing
// is reused while it is that recent, and made anew otherwise.
type listings struct {
	mu      sync.Mutex
	done    map[listingKey]*listing
	running map[listingKey]*listing
}

// listingKey names what a listing lists: kind ("states" or "journals")
// of entityType.
type listingKey struct{ kind, entityType string }

// listing is one listing: begun at began, ready once done is closed.
type listing struct {
	began   time.Time
	done    chan struct{}
	byShard map[int][]string
	err     error
}

// since returns the ids of key's listing made by list, in a listing begun
// at or after t, by shard.
func (j *listings) since(ctx context.Context, key listingKey, t time.Time, list func(context.Context) ([]string, error)) (map[int][]string, error) {
	for {
		j.mu.Lock()
		if j.done == nil {
			j.done, j.running = make(map[listingKey]*listing), make(map[listingKey]*listing)
		}
		if l := j.done[key]; l != nil && !l.began.Before(t) {
			j.mu.Unlock()
			return l.byShard, nil
		}
		l := j.running[key]
		if l == nil {
			l = &listing{began: time.Now(), done: make(chan struct{})}
			j.running[key] = l
			j.mu.Unlock()
			var ids []string
			if ids, l.err = list(ctx); l.err == nil {
				l.byShard = byShard(key.entityType, ids)
			}
			j.mu.Lock()
			delete(j.running, key)
			if l.err == nil {
				j.done[key] = l
			}
			close(l.done)
			j.mu.Unlock()
			return l.byShard, l.err
		}
		// A listing is under way: wait for it; if it began too early, or
		// failed, the next pass makes one more.
		j.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// byShard buckets the ids of entityType's entities by their shard.
func byShard(entityType string, ids []string) map[int][]string {
	out := make(map[int][]string)
	for _, id := range ids {
		shard := cluster.ShardOf(entityType, id)
		out[shard] = append(out[shard], id)
	}
	return out
}
