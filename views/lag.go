package views

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/trellis-go/trellis/entities"
)

// Lag is how far a view is behind its shards' changes.
type Lag struct {
	// Changes is how many changes were recorded and not applied yet (of
	// every entity type of the shards: the log is per shard).
	Changes uint64
	// Oldest is when the oldest of them was recorded, about (zero when
	// there are none).
	Oldest time.Time
}

// noteLag notes what is left after a batch: the changes after it, up to
// the head read with it.
func (p *projector) noteLag(head uint64, read []entities.Change) {
	var l Lag
	if head > p.pos {
		l.Changes = head - p.pos
		if len(read) > 0 {
			l.Oldest = read[len(read)-1].At // about: the next is a little later
		}
	}
	p.lagMu.Lock()
	p.lag = l
	p.lagMu.Unlock()
}

func (p *projector) lagNow() Lag {
	p.lagMu.Lock()
	defer p.lagMu.Unlock()
	return p.lag
}

// ShardLag is a view's lag on one shard.
type ShardLag struct {
	View  string
	Shard int
	Lag
}

// Lag is each view's lag on each shard this instance projects now.
func (r *Runner) Lag() []ShardLag {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ShardLag
	for key, p := range r.projectors.All() {
		out = append(out, ShardLag{View: key.Name, Shard: key.Shard, Lag: p.lagNow()})
	}
	return out
}

// Status is a view as the admin API shows it.
type Status struct {
	Name string
	// Generation is the name its rows are kept under; Answering whether
	// it answers the queries (false while it is built anew).
	Generation string
	Answering  bool
	// Shards is how many shards this instance projects it on; Lag its
	// lag summed over them (Oldest the oldest change of any).
	Shards int
	Lag
}

// Statuses are the views started, by name.
func (r *Runner) Statuses(ctx context.Context) ([]Status, error) {
	byView := make(map[string]*Status)
	for _, name := range r.Views() {
		d, err := r.view(name)
		if err != nil {
			continue
		}
		g, err := r.answeringGen(ctx, d)
		if err != nil {
			return nil, err
		}
		byView[name] = &Status{Name: name, Generation: d.gen, Answering: g.Gen == "" || g.Gen == d.gen}
	}
	for _, l := range r.Lag() {
		st := byView[l.View]
		if st == nil {
			continue
		}
		st.Shards++
		st.Changes += l.Changes
		if !l.Oldest.IsZero() && (st.Oldest.IsZero() || l.Oldest.Before(st.Oldest)) {
			st.Oldest = l.Oldest
		}
	}
	out := make([]Status, 0, len(byView))
	for _, name := range slices.Sorted(maps.Keys(byView)) {
		out = append(out, *byView[name])
	}
	return out, nil
}
