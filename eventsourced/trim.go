package eventsourced

import (
	"context"
	"errors"
	"fmt"

	"github.com/trellis-go/trellis/entities"
)

// sweepJournals trims the journal of each entity of r's type that this
// instance serves (see Sweeper); a type without a retention has nothing
// to trim. It goes on past an entity that fails, and returns every
// failure.
func (r *Running[S]) sweepJournals(ctx context.Context, trimmed func(n int)) error {
	if r.t.opts.retention <= 0 {
		return nil
	}
	ids, err := r.journal.JournalIDs(ctx, r.ComponentID())
	if err != nil {
		return fmt.Errorf("list the journals: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := r.trim(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", id, err))
		}
		if n > 0 {
			trimmed(n)
		}
	}
	return errors.Join(errs...)
}

// trim drops the events of entity id that its snapshot covers when that
// snapshot is older than the retention, under the fence of its shard, and
// returns how many it dropped. It writes nothing when this instance does
// not serve the shard, when the entity was deleted, or when a write came
// first (the fence moved, or the head did).
func (r *Running[S]) trim(ctx context.Context, id string) (int, error) {
	typ := r.ComponentID()
	fence, serving := entities.Fence{}, true
	if r.host.Cluster != nil {
		fence, serving = r.host.Cluster.Fence(typ, id)
	}
	if !serving {
		return 0, nil
	}
	head, _, err := r.journal.ReadJournal(ctx, typ, id)
	if err != nil {
		return 0, err
	}
	snap := head.Snapshot
	if snap == nil || head.Deleted || r.host.System.Clock().Since(snap.At) < r.t.opts.retention {
		return 0, nil
	}
	first, err := r.journal.Events(ctx, typ, id, 0, 1)
	if err != nil || len(first) == 0 || first[0].Seq > snap.Seq {
		return 0, err
	}
	err = r.journal.Append(ctx, fence, typ, id, entities.JournalWrite{Expected: head.Seq, TrimThrough: snap.Seq})
	switch {
	case errors.Is(err, entities.ErrConflict), errors.Is(err, entities.ErrJournalDeleted), errors.Is(err, entities.ErrFenced):
		return 0, nil
	case err != nil:
		return 0, err
	}
	// The events kept are numbered without a gap: those up to the
	// snapshot's from the first kept went.
	return int(snap.Seq - first[0].Seq + 1), nil
}
