package views

import "github.com/trellis-go/trellis/entities"

// currentStates is build's source for a view over a key-value entity
// type: it calls fn with the current state of every entity of the shard,
// from a listing shared with the builds of the other shards (listing.States).
func (p *projector) currentStates(fn func(entities.Change) error) error {
	return p.r.listings.States(p.ctx, p.r.cfg.Log, p.shard, p.d.entityType, p.builtFrom, fn)
}
