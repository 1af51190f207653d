package views

import (
	"context"

	"github.com/trellis-go/trellis/entities"
)

// currentStates is build's source for a view over a key-value entity
// type: it calls fn with the current state of every entity of the shard.
// A store that lists every shard's states in one pass (an
// [entities.StateLister]) is listed once for the builds of all the
// shards (see listings); another is asked shard by shard.
func (p *projector) currentStates(fn func(entities.Change) error) error {
	lister, ok := p.r.cfg.Log.(entities.StateLister)
	if !ok {
		return p.r.cfg.Log.Current(p.ctx, p.shard, p.d.entityType, fn)
	}
	ids, err := p.r.listings.since(p.ctx, listingKey{"states", p.d.entityType}, p.builtFrom,
		func(ctx context.Context) ([]string, error) { return lister.StateIDs(ctx, p.d.entityType) })
	if err != nil {
		return err
	}
	return lister.States(p.ctx, p.d.entityType, ids[p.shard], fn)
}
