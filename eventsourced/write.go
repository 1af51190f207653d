package eventsourced

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/tracing"
)

// pending is a write being made: the events of the commands run so far,
// and the state after them.
type pending[S any] struct {
	state   S
	events  []entities.JournalEvent
	delete  bool
	applied []entities.Applied // the records of the commands that carry a key
}

// add encodes eff's events after w's, applies them to w's state, notes a
// delete, and returns the command's reply (from the state after its
// events) with its applied record added to w's when env carries a key
// (entities.AppliedFor). On an error w is as it was.
func (a *actor[S]) add(w *pending[S], env envelope[S], eff effect[S]) (any, error) {
	t := a.r.t
	now := a.r.host.System.Clock().Now()
	events := w.events // appended to in place: on an error w.events is as it was
	for _, e := range eff.events {
		name, data, err := t.encodeEvent(e)
		if err != nil {
			return nil, err
		}
		events = append(events, entities.JournalEvent{Seq: a.seq + uint64(len(events)) + 1, Name: name, Data: data, At: now})
	}
	state := w.state
	if !t.flat {
		state = a.copyOf(state)
	}
	for _, e := range eff.events {
		state = t.apply(state, e)
	}
	reply := eff.value
	if eff.kind == persistThenReply {
		reply = eff.reply(a.copyOf(state))
	}
	rec, err := entities.AppliedFor(env.Ctx, env.Cmd.Name, reply, nil, a.r.host.KeyRetention, a.r.host.CommandIDRetention)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		w.applied = append(w.applied, *rec)
	}
	w.state, w.events = state, events
	w.delete = w.delete || eff.kind == deleteThenReply
	return reply, nil
}

// write appends w's events under the entity's fence, with a snapshot when
// they pass a multiple of the type's SnapshotEvery, and drops the events
// a snapshot older than the retention covers; then it keeps w's state.
func (a *actor[S]) write(ctx context.Context, w *pending[S]) (err error) {
	t := a.r.t
	ctx, span := tracing.StartStore(ctx, a.r.tracer(), "entity persist", t.ComponentID(), a.id)
	defer func() { tracing.End(span, components.ErrorType(err)) }()
	now := a.r.host.System.Clock().Now()
	jw := entities.JournalWrite{Expected: a.seq, Events: w.events, Delete: w.delete, Applied: w.applied}
	seq := a.seq + uint64(len(w.events))
	if n := uint64(t.opts.snapshotEvery); n > 0 && seq/n > a.seq/n {
		data, err := json.Marshal(w.state)
		if err != nil {
			return fmt.Errorf("encode the snapshot: %w", err)
		}
		jw.Snapshot = &entities.Snapshot{Seq: seq, Data: data, At: now}
	}
	if r := t.opts.retention; r > 0 && a.snapSeq > a.trimmed && now.Sub(a.snapAt) >= r {
		jw.TrimThrough = a.snapSeq
	}
	if err := a.r.journal.Append(ctx, a.fence, t.ComponentID(), a.id, jw); err != nil {
		return err
	}
	if err := a.keep(w.state); err != nil {
		a.loaded = false // written, but not kept: the next command loads it
		return err
	}
	a.seq, a.deleted = seq, w.delete
	if jw.Snapshot != nil {
		a.snapSeq, a.snapAt = seq, jw.Snapshot.At
	}
	a.trimmed = max(a.trimmed, jw.TrimThrough)
	return nil
}
