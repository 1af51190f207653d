// Package listing shares one pass over a store's keys (the ids of an
// entity type's states, or of its journals) among the shards' readers
// that need it at about the same time: the builds of a view new on every
// shard, the catch-ups of a consumer behind the change log's bound.
package listing

import (
	"context"
	"sync"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
)

// Shared shares the listings of an entity type's ids (of its current
// states, or of its journals) among the shards' readers: a listing walks
// the store's keys, and the readers of every shard would each make their
// own. A listing is made once, bucketed by shard. A reader may take a
// listing only if it began after the reader read its position (an entity
// first written before that position is in it), so a listing is reused
// while it is that recent, and made anew otherwise. The zero value is
// ready to use.
type Shared struct {
	mu      sync.Mutex
	done    map[Key]*listing
	running map[Key]*listing
}

// Key names what a listing lists: Kind ("states" or "journals") of
// EntityType.
type Key struct{ Kind, EntityType string }

// listing is one listing: begun at began, ready once done is closed.
type listing struct {
	began   time.Time
	done    chan struct{}
	byShard map[int][]string
	err     error
}

// Since returns the ids of key's listing made by list, in a listing begun
// at or after t, by shard.
func (j *Shared) Since(ctx context.Context, key Key, t time.Time, list func(context.Context) ([]string, error)) (map[int][]string, error) {
	for {
		j.mu.Lock()
		if j.done == nil {
			j.done, j.running = make(map[Key]*listing), make(map[Key]*listing)
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
				l.byShard = byShard(key.EntityType, ids)
			}
			j.mu.Lock()
			delete(j.running, key)
			if l.err == nil {
				j.done[key] = l
				time.AfterFunc(keepFor, func() { j.forget(key, l) })
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

// keepFor is how long a listing is kept for the readers that come after
// it was made: those of one start or catch-up come within it, and the ids
// of a type's every entity are not held for good.
var keepFor = time.Minute

// forget drops listing l of key, unless a newer one replaced it.
func (j *Shared) forget(key Key, l *listing) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done[key] == l {
		delete(j.done, key)
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

// States calls fn with the current state of every entity of entityType
// in shard, read from log after t (every entity written before t is
// there). A log that lists every shard's states in one pass (an
// [entities.StateLister]) is listed once for the readers of all the
// shards that ask about then (Since); another is asked shard by shard.
func (j *Shared) States(ctx context.Context, log entities.ChangeLog, shard int, entityType string, t time.Time,
	fn func(entities.Change) error) error {
	lister, ok := log.(entities.StateLister)
	if !ok {
		return log.Current(ctx, shard, entityType, fn)
	}
	ids, err := j.Since(ctx, Key{Kind: "states", EntityType: entityType}, t,
		func(ctx context.Context) ([]string, error) { return lister.StateIDs(ctx, entityType) })
	if err != nil {
		return err
	}
	return lister.States(ctx, entityType, ids[shard], fn)
}
