package views

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/listing"
)

// foldJournals is build's source for a view over events: it folds the
// journal of every entity of the shard into its row, up to the shard's
// position head, and passes each row to add. The events after head are
// the projector's to apply from the log once the shard is built, so they
// are left out: an entity's journal number at head is the one before its
// first event recorded after head (the log keeps them, from the view's
// registration, unless its bound trimmed them: then the build fails, and
// runs again).
func (p *projector) foldJournals(head uint64, add func(rowOp) error) error {
	js, ok := p.r.cfg.Log.(entities.JournalStore)
	if !ok {
		return fmt.Errorf("build view %s: %w", p.d.name, errNoJournal)
	}
	type atHead struct {
		seq     uint64
		deleted bool
	}
	ids, err := p.r.listings.Since(p.ctx, listing.Key{Kind: "journals", EntityType: p.d.entityType}, p.builtFrom,
		func(ctx context.Context) ([]string, error) { return js.JournalIDs(ctx, p.d.entityType) })
	if err != nil {
		return err
	}
	heads := make(map[string]atHead)
	for _, id := range ids[p.shard] {
		seq, deleted, err := js.JournalSeq(p.ctx, p.d.entityType, id)
		if err != nil {
			return err
		}
		heads[id] = atHead{seq: seq, deleted: deleted}
	}
	for after := head; ; {
		changes, _, missed, err := p.r.cfg.Log.Changes(p.ctx, p.shard, after, batch)
		switch {
		case err != nil:
			return err
		case missed:
			return fmt.Errorf("build view %s: the change log was trimmed past position %d during the build", p.d.name, head)
		}
		for _, c := range changes {
			h, ok := heads[c.EntityID]
			if c.EntityType != p.d.entityType || !ok {
				continue
			}
			if c.Deleted {
				h.deleted = false // deleted after head: the log's to apply
			} else {
				h.seq = min(h.seq, c.Revision-1)
			}
			heads[c.EntityID] = h
		}
		if len(changes) < batch {
			break
		}
		after = changes[len(changes)-1].Seq
	}
	for id, h := range heads {
		if h.deleted {
			continue
		}
		op, err := p.foldJournal(js, id, h.seq)
		if err != nil {
			return err
		}
		if op.row != nil {
			if err := add(op); err != nil {
				return err
			}
		}
	}
	return nil
}

// foldJournal folds entity id's kept events up to number last into its
// row: the op that sets it (row nil: none).
func (p *projector) foldJournal(js entities.JournalStore, id string, last uint64) (rowOp, error) {
	var op rowOp
	for after := uint64(0); after < last; {
		evs, err := js.Events(p.ctx, p.d.entityType, id, after, batch)
		if err != nil || len(evs) == 0 {
			return op, err
		}
		for _, e := range evs {
			if e.Seq > last {
				return op, nil
			}
			c := entities.Change{EntityType: p.d.entityType, EntityID: id, Revision: e.Seq, Data: entities.EventChangeData(e.Name, e.Data)}
			next, ok, err := p.d.project(c, op.row)
			if err != nil {
				p.r.log.Error("views: the updater failed on a journal's event; the entity's row is left as it was", "view", p.d.name,
					"entity", id, "event", e.Seq, "err", err.Error())
				continue
			}
			if ok {
				op = next
			}
		}
		after = evs[len(evs)-1].Seq
	}
	return op, nil
}
