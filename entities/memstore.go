package entities

import (
	"context"
	"fmt"
	"sync"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/internal/tracing"
)

// MemoryStore is a [Store] that keeps documents in process memory: the
// embedded default for a single server instance and for tests. It is not
// durable (state is gone when the process exits) and is shared only by
// instances in the same process (as in tests); use [RedisStore] to share
// state between processes.
//
// It is safe for concurrent use. Save and Load copy the document, so callers
// may reuse or change their buffers afterwards.
type MemoryStore struct {
	mu sync.Mutex
	// rev is the last revision handed out. One counter for the whole store
	// is the simplest way, in memory, to never give a document a revision
	// it had before, not even after a delete (no ABA), without keeping a
	// tombstone per deleted document; the contract asks no more than that.
	rev  uint64
	docs map[memKey]Record
	// applied are the entities' applied records (memstore_applied.go),
	// kept across a delete; clock tells their age.
	applied map[memKey]*memApplied
	clock   clockwork.Clock
	// logs are the shards' change logs, made when a consumer registers.
	logs    map[int]*memLog
	limit   int // DefaultChangeLogLimit, or SetChangeLogLimit's
	watches watchers
	// journals are the event-sourced entities' (journal_memory.go), made
	// on the first append.
	journals map[memKey]*memJournal
}

// memKey keys a document. A struct rather than a joined string so that
// entity types and ids may contain any character without colliding.
type memKey struct {
	entityType, id string
}

var _ AppliedStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{docs: make(map[memKey]Record), applied: make(map[memKey]*memApplied),
		clock: clockwork.NewRealClock(), logs: make(map[int]*memLog), limit: DefaultChangeLogLimit}
}

// Load implements [Store]. The returned Data is a copy the caller owns.
func (s *MemoryStore) Load(ctx context.Context, entityType, id string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, opErr("load", entityType, id, err)
	}
	s.mu.Lock()
	rec, ok := s.docs[memKey{entityType, id}]
	s.mu.Unlock()
	if !ok {
		return Record{}, nil
	}
	// Copy outside the lock: the stored slice is never changed in place
	// (Save replaces it), so reading it unlocked is safe.
	return Record{Data: cloneData(rec.Data), Revision: rec.Revision}, nil
}

// Revision implements [Store].
func (s *MemoryStore) Revision(ctx context.Context, entityType, id string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, opErr("revision", entityType, id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[memKey{entityType, id}].Revision, nil
}

// Save implements [Store]. It stores a copy of data.
func (s *MemoryStore) Save(ctx context.Context, entityType, id string, data []byte, expected uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, opErr("save", entityType, id, err)
	}
	// Copy before taking the lock to keep the critical section short.
	data = cloneData(data)
	key := memKey{entityType, id}
	tc := tracing.CaptureForLink(ctx)

	s.mu.Lock()
	if err := s.checkWrite(ctx, "save", key, expected); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	s.rev++
	rev := s.rev
	s.docs[key] = Record{Data: data, Revision: rev}
	c := s.record(Change{EntityType: entityType, EntityID: id, Revision: rev, Data: data, TraceContext: tc})
	s.mu.Unlock()
	s.heard(c)
	return rev, nil
}

// Delete implements [Store].
func (s *MemoryStore) Delete(ctx context.Context, entityType, id string, expected uint64) error {
	if err := ctx.Err(); err != nil {
		return opErr("delete", entityType, id, err)
	}
	key := memKey{entityType, id}
	tc := tracing.CaptureForLink(ctx)

	s.mu.Lock()
	if err := s.checkWrite(ctx, "delete", key, expected); err != nil {
		s.mu.Unlock()
		return err
	}
	// Deleting an absent document (expected 0) is a no-op; the revision
	// counter is not reset, so a later create still gets a fresh revision.
	var c Change
	if expected != 0 {
		delete(s.docs, key)
		c = s.record(Change{EntityType: entityType, EntityID: id, Revision: expected, Deleted: true, TraceContext: tc})
	}
	s.mu.Unlock()
	s.heard(c)
	return nil
}

// Record implements [AppliedStore].
func (s *MemoryStore) Record(ctx context.Context, entityType, id string, expected uint64, a Applied) error {
	if err := ctx.Err(); err != nil {
		return opErr("record", entityType, id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkWrite(withApplied(ctx, &a), "record", memKey{entityType, id}, expected)
}

// checkWrite checks a write of key's entity: the applied record ctx
// carries must not be recorded already, and the stored revision must be
// expected. When both hold, it records the applied record (the caller
// then writes the state under the same lock). s.mu is held.
func (s *MemoryStore) checkWrite(ctx context.Context, op string, key memKey, expected uint64) error {
	a := appliedIn(ctx)
	now := s.clock.Now()
	if a != nil {
		if answer, ok := s.appliedAnswer(key, a, now); ok {
			return opErr(op, key.entityType, key.id, &AlreadyAppliedError{Answer: cloneData(answer)})
		}
	}
	if found := s.docs[key].Revision; found != expected {
		return conflictErr(op, key.entityType, key.id, expected, found)
	}
	if a != nil {
		s.recordApplied(key, a, now)
	}
	return nil
}

// Ping implements [Store]. Memory is always reachable; it only reports a
// done context, like any other call.
func (s *MemoryStore) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// cloneData copies a document. Unlike bytes.Clone it never returns nil, so
// a stored empty document reads back as present-but-empty, as it does from
// Redis.
func cloneData(data []byte) []byte {
	out := make([]byte, len(data))
	copy(out, data)
	return out
}

// opErr wraps err with the operation and the document it was about; shared
// by the stores so that their messages read the same. Type and id are
// quoted because both may contain '/' and ':'.
func opErr(op, entityType, id string, err error) error {
	return fmt.Errorf("%s %q/%q: %w", op, entityType, id, err)
}

// conflictErr is the error Save and Delete return when the stored revision
// is not the expected one. It wraps [ErrConflict].
func conflictErr(op, entityType, id string, expected, found uint64) error {
	return opErr(op, entityType, id,
		fmt.Errorf("expected revision %d, found %d: %w", expected, found, ErrConflict))
}
