package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
)

// Lag is how far a consumer is behind its entity's changes.
type Lag struct {
	// Changes is how many changes were recorded and not handled yet (of
	// every entity type of the shards: the log is per shard).
	Changes uint64
	// Oldest is when the oldest of them was recorded, about (zero when
	// there are none).
	Oldest time.Time
}

// noteLag notes what is left at the end of a step: the pending changes,
// and those after the cursor (recorded after the last one consumed).
func (w *worker) noteLag() {
	var oldest time.Time
	for _, p := range w.pending {
		if oldest.IsZero() || p.firstAt.Before(oldest) {
			oldest = p.firstAt
		}
	}
	if w.cursor < w.head && !w.lastAt.IsZero() && (oldest.IsZero() || w.lastAt.Before(oldest)) {
		oldest = w.lastAt
	}
	w.lagMu.Lock()
	defer w.lagMu.Unlock()
	w.lag = Lag{Changes: w.head - min(w.target(), w.head), Oldest: oldest}
}

func (w *worker) lagNow() Lag {
	w.lagMu.Lock()
	defer w.lagMu.Unlock()
	return w.lag
}

// Lag is each consumer's lag on the shards this instance consumes now.
func (r *Runner) Lag() map[string]Lag {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Lag, len(r.consumers))
	for id := range r.consumers {
		out[id] = Lag{}
	}
	for key, w := range r.workers.All() {
		l, sum := w.lagNow(), out[key.Name]
		sum.Changes += l.Changes
		if !l.Oldest.IsZero() && (sum.Oldest.IsZero() || l.Oldest.Before(sum.Oldest)) {
			sum.Oldest = l.Oldest
		}
		out[key.Name] = sum
	}
	return out
}

// Behind counts, from the store, the changes of every shard that some
// consumer has not handled yet (wherever its shards are served): 0 once
// every consumer has caught up with every change so far. The test kit
// waits on it.
func (r *Runner) Behind(ctx context.Context) (uint64, error) {
	if r.cfg.Log == nil {
		return 0, nil
	}
	var behind uint64
	for _, id := range r.Consumers() {
		for shard := range cluster.NumShards {
			cp, ok, err := r.cfg.Log.Checkpoint(ctx, id, shard)
			if err != nil {
				return 0, fmt.Errorf("consumer %s: %w", id, err)
			}
			if !ok {
				continue
			}
			_, head, _, err := r.cfg.Log.Changes(ctx, shard, cp, 1)
			if err != nil {
				return 0, fmt.Errorf("consumer %s: %w", id, err)
			}
			behind += head - min(cp, head)
		}
	}
	return behind, nil
}
