package entities

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/trellis-go/trellis/internal/tracing"
)

var _ JournalStore = (*MemoryStore)(nil)

// memJournal is one entity's journal in a MemoryStore.
type memJournal struct {
	head   JournalHead
	events []JournalEvent // in order; Data never changed in place
}

// ReadJournal implements [JournalStore]. The snapshot and the events are
// copies the caller owns.
func (s *MemoryStore) ReadJournal(ctx context.Context, entityType, id string) (JournalHead, []JournalEvent, error) {
	if err := ctx.Err(); err != nil {
		return JournalHead{}, nil, opErr("read the journal", entityType, id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.journals[memKey{entityType, id}]
	if j == nil {
		return JournalHead{}, nil, nil
	}
	head := j.head
	after := uint64(0)
	if head.Snapshot != nil {
		snap := *head.Snapshot
		snap.Data = cloneData(snap.Data)
		head.Snapshot, after = &snap, snap.Seq
	}
	return head, copyEvents(j.events, after, len(j.events)), nil
}

// JournalSeq implements [JournalStore].
func (s *MemoryStore) JournalSeq(ctx context.Context, entityType, id string) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, opErr("read the journal's seq", entityType, id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.journals[memKey{entityType, id}]; j != nil {
		return j.head.Seq, j.head.Deleted, nil
	}
	return 0, false, nil
}

// JournalIDs implements [JournalStore].
func (s *MemoryStore) JournalIDs(ctx context.Context, entityType string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list the journals of %q: %w", entityType, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return idsOf(s.journals, entityType), nil
}

// Events implements [JournalStore].
func (s *MemoryStore) Events(ctx context.Context, entityType, id string, after uint64, limit int) ([]JournalEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, opErr("read the events", entityType, id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.journals[memKey{entityType, id}]
	if j == nil {
		return nil, nil
	}
	return copyEvents(j.events, after, limit), nil
}

// copyEvents copies up to limit of events numbered after after.
func copyEvents(events []JournalEvent, after uint64, limit int) []JournalEvent {
	i, _ := slices.BinarySearchFunc(events, after+1, func(e JournalEvent, seq uint64) int {
		return cmp.Compare(e.Seq, seq)
	})
	var out []JournalEvent
	for _, e := range events[i:min(len(events), i+max(limit, 0))] {
		e.Data = cloneData(e.Data)
		out = append(out, e)
	}
	return out
}

// Append implements [JournalStore]; the fence is not checked.
func (s *MemoryStore) Append(ctx context.Context, _ Fence, entityType, id string, w JournalWrite) error {
	const op = "append to the journal"
	if err := ctx.Err(); err != nil {
		return opErr(op, entityType, id, err)
	}
	events := make([]JournalEvent, len(w.Events))
	for i, e := range w.Events {
		if !ValidEventName(e.Name) {
			return opErr(op, entityType, id, fmt.Errorf("event %d: name %q is not a valid event name", e.Seq, e.Name))
		}
		e.Data, e.At = cloneData(e.Data), toMillis(e.At)
		events[i] = e
	}
	var snap *Snapshot
	if w.Snapshot != nil {
		c := *w.Snapshot
		c.Data, c.At = cloneData(c.Data), toMillis(c.At)
		snap = &c
	}
	tc := tracing.CaptureForLink(ctx)
	key := memKey{entityType, id}

	s.mu.Lock()
	if s.journals == nil {
		s.journals = make(map[memKey]*memJournal)
	}
	j := s.journals[key]
	if j == nil {
		j = &memJournal{}
	}
	now := s.clock.Now()
	for i := range w.Applied {
		if answer, ok := s.appliedAnswer(key, &w.Applied[i], now); ok {
			s.mu.Unlock()
			return opErr(op, entityType, id, &AlreadyAppliedError{Answer: cloneData(answer)})
		}
	}
	if j.head.Seq != w.Expected {
		s.mu.Unlock()
		return conflictErr(op, entityType, id, w.Expected, j.head.Seq)
	}
	if j.head.Deleted {
		s.mu.Unlock()
		return opErr(op, entityType, id, ErrJournalDeleted)
	}
	s.journals[key] = j
	for i := range w.Applied {
		s.recordApplied(key, &w.Applied[i], now)
	}
	var heard []Change
	for _, e := range events {
		j.events = append(j.events, e)
		heard = append(heard, s.record(Change{EntityType: entityType, EntityID: id, Revision: e.Seq,
			Data: EventChangeData(e.Name, e.Data), TraceContext: tc}))
	}
	if snap != nil {
		j.head.Snapshot = snap
	}
	j.head.Seq = w.newSeq()
	if w.Delete {
		j.head.Deleted = true
		heard = append(heard, s.record(Change{EntityType: entityType, EntityID: id, Revision: j.head.Seq, Deleted: true, TraceContext: tc}))
	}
	if w.TrimThrough > 0 {
		i, _ := slices.BinarySearchFunc(j.events, w.TrimThrough+1, func(e JournalEvent, seq uint64) int {
			return cmp.Compare(e.Seq, seq)
		})
		j.events = slices.Delete(j.events, 0, i)
	}
	s.mu.Unlock()
	for _, c := range heard {
		s.heard(c)
	}
	return nil
}

// toMillis is t to the millisecond, as the Redis stores keep it.
func toMillis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
