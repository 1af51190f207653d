package views

import (
	"context"
	"sync"
	"time"

	"github.com/trellis-go/trellis/entities"
)

// journalIDs shares the listings of an event-sourced type's journals
// among the shards' builds: a listing walks every shard's keys, and the
// projectors of a view new on every shard would each make their own. A
// build may take a listing only if it began after the build read its
// position (an entity first written before that position is in it), so
// a listing is reused while it is that recent, and made anew otherwise.
type journalIDs struct {
	mu      sync.Mutex
	byType  map[string]*listing
	running map[string]*listing
}

// listing is one listing of a type's journals: begun at began, ready
// once done is closed.
type listing struct {
	began time.Time
	done  chan struct{}
	ids   []string
	err   error
}

// since returns the ids of entityType's journals, listed by js in a
// listing begun at or after t.
func (j *journalIDs) since(ctx context.Context, js entities.JournalStore, entityType string, t time.Time) ([]string, error) {
	for {
		j.mu.Lock()
		if j.byType == nil {
			j.byType, j.running = make(map[string]*listing), make(map[string]*listing)
		}
		if l := j.byType[entityType]; l != nil && !l.began.Before(t) {
			j.mu.Unlock()
			return l.ids, l.err
		}
		l := j.running[entityType]
		if l == nil {
			l = &listing{began: time.Now(), done: make(chan struct{})}
			j.running[entityType] = l
			j.mu.Unlock()
			l.ids, l.err = js.JournalIDs(ctx, entityType)
			j.mu.Lock()
			delete(j.running, entityType)
			if l.err == nil {
				j.byType[entityType] = l
			}
			close(l.done)
			j.mu.Unlock()
			return l.ids, l.err
		}
		// A listing is under way: wait for it; if it began too early, the
		// next pass makes one more.
		j.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
