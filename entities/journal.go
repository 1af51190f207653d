package entities

import (
	"context"
	"errors"
	"time"
)

// JournalStore is a [Store] that also keeps the journals of event-sourced
// entities (package eventsourced): per (entity type, entity id), its events
// in order, numbered from 1 with no gap, and a head that holds the last
// event's number, the latest snapshot of the state and whether the entity
// was deleted.
//
// A [JournalStore.Append] writes its events, its snapshot and its delete
// in one atomic step, under the shard's fence on a [ShardedRedisStore],
// together with one [Change] per event (and one for a delete) in the
// shard's change log ([ChangeLog]), which consumers read: a change's
// Revision is the event's number and its Data is [EventChangeData]. A
// write that conflicts or that the fence refuses writes nothing.
//
// Every store of this package is one; all pass the same conformance suite
// (journal_test.go).
type JournalStore interface {
	Store
	// ReadJournal returns the entity's head and the events after its
	// snapshot (all of them when it has none), in order. An entity never
	// written has the zero head and no events.
	ReadJournal(ctx context.Context, entityType, id string) (JournalHead, []JournalEvent, error)
	// JournalSeq returns the head's Seq and Deleted, without the snapshot
	// or the events: how an entity checks that what it holds is fresh.
	JournalSeq(ctx context.Context, entityType, id string) (seq uint64, deleted bool, err error)
	// Events returns up to limit of the entity's kept events numbered after
	// after, in order: how its journal is paged and exported.
	Events(ctx context.Context, entityType, id string, after uint64, limit int) ([]JournalEvent, error)
	// JournalIDs returns the ids of entityType's entities that have a
	// journal, sorted: how a type's journals are exported.
	JournalIDs(ctx context.Context, entityType string) ([]string, error)
	// Append writes w if the head's Seq is w.Expected and the entity is
	// not deleted; otherwise it writes nothing and fails with an error
	// wrapping ErrConflict, or ErrJournalDeleted. Under a fence that is no
	// longer the shard's it fails with ErrFenced (a ShardedRedisStore
	// writes only under a fence; the other stores take the zero Fence).
	Append(ctx context.Context, f Fence, entityType, id string, w JournalWrite) error
}

// JournalHead is what a journal holds besides its events.
type JournalHead struct {
	// Seq is the number of the last event written (0: none).
	Seq uint64
	// Deleted is true once the entity was deleted: its journal is kept, and
	// no event can be appended any more.
	Deleted bool
	// Snapshot is the latest snapshot, nil when there is none.
	Snapshot *Snapshot
}

// Snapshot is an entity's state as it stood after event Seq, encoded.
type Snapshot struct {
	Seq  uint64
	Data []byte
	// At is when it was taken (the writer's clock, to the millisecond).
	At time.Time
}

// JournalEvent is one event of a journal.
type JournalEvent struct {
	Seq uint64
	// Name is the event type's stable name (letters, digits, '.', '_' and
	// '-'; see ValidEventName).
	Name string
	// Data is the event, encoded (JSON).
	Data []byte
	// At is when it was persisted (the writer's clock, to the millisecond).
	At time.Time
}

// JournalWrite is one atomic write of a journal.
type JournalWrite struct {
	// Expected is the head's Seq the write was computed from.
	Expected uint64
	// Events are appended in order; the writer numbers them, from
	// Expected+1 (an import may start higher, after a snapshot), and the
	// head's Seq becomes the last one's.
	Events []JournalEvent
	// Snapshot, when set, replaces the head's snapshot; the head's Seq
	// becomes at least its Seq.
	Snapshot *Snapshot
	// Delete marks the entity deleted, after the events.
	Delete bool
	// Applied are the records of the commands whose events these are
	// (see AppliedStore): while one of their keys is kept already the
	// write writes nothing and fails with an *AlreadyAppliedError holding
	// that key's first answer; otherwise they are written with the events.
	Applied []Applied
	// TrimThrough, when not 0, drops the events numbered up to it: those a
	// kept snapshot covers (retention). It must not exceed the snapshot's
	// Seq.
	TrimThrough uint64
}

// ErrJournalDeleted is wrapped by an Append on a deleted entity: nothing
// was written.
var ErrJournalDeleted = errors.New("the entity was deleted")

// EventChangeData is the Data of the change an event is recorded as in the
// change log: {"name":<name>,"data":<data>}. name is a valid event name,
// so it needs no escaping (the Redis scripts build the same bytes).
func EventChangeData(name string, data []byte) []byte {
	b := make([]byte, 0, len(name)+len(data)+20)
	b = append(b, `{"name":"`...)
	b = append(b, name...)
	b = append(b, `","data":`...)
	b = append(b, data...)
	return append(b, '}')
}

// ValidEventName reports whether name can name an event type in a journal:
// 1 to 100 of letters, digits, '.', '_' and '-'.
func ValidEventName(name string) bool {
	if name == "" || len(name) > 100 {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// newSeq is the head's Seq after w.
func (w *JournalWrite) newSeq() uint64 {
	seq := w.Expected
	if n := len(w.Events); n > 0 {
		seq = max(seq, w.Events[n-1].Seq)
	}
	if w.Snapshot != nil {
		seq = max(seq, w.Snapshot.Seq)
	}
	return seq
}
