package views

import (
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
	out := make([]ShardLag, 0, len(r.projectors))
	for key, p := range r.projectors {
		out = append(out, ShardLag{View: key.view, Shard: key.shard, Lag: p.lagNow()})
	}
	return out
}
