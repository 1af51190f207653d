package entities

import (
	"context"

	"github.com/trellis-go/trellis/components"
)

// Store keeps key-value entity state: one JSON document per (entity type,
// entity id), with a revision. Revisions make concurrent writers safe: every
// write names the revision it was computed from and fails with ErrConflict
// if the stored one has moved on, so two server instances on one store
// never lose an update.
//
// A document's revision only grows, and it keeps growing across a delete:
// a document that is deleted and created again gets a revision greater
// than any it had before, so a revision seen once for a document never
// comes back to it (no ABA). Revisions are per document: two documents may
// hold the same number, so that no write needs a store-wide counter (which
// would put every document of a Redis Cluster on one master). Revision 0
// means "absent".
//
// Implementations: [MemoryStore] (the embedded default; not durable),
// [RedisStore], and [ShardedRedisStore] (a [FencedStore], for a cluster of
// instances with one owner per entity, whose revisions are drawn per shard
// rather than per document). All pass the same conformance suite
// (store_test.go).
type Store interface {
	// Load returns the document and its revision; (nil, 0) when absent.
	Load(ctx context.Context, entityType, id string) (Record, error)
	// Revision returns the stored revision (0 when absent) without the
	// document: how an entity checks that what it holds in memory is fresh.
	Revision(ctx context.Context, entityType, id string) (uint64, error)
	// Save writes data if the stored revision is expected (0: absent) and
	// returns the new revision; otherwise it writes nothing and returns an
	// error wrapping ErrConflict.
	Save(ctx context.Context, entityType, id string, data []byte, expected uint64) (uint64, error)
	// Delete removes the document if the stored revision is expected;
	// otherwise it returns an error wrapping ErrConflict. Deleting an absent
	// document with expected 0 succeeds.
	Delete(ctx context.Context, entityType, id string, expected uint64) error
	// Ping checks that the store can be reached (for /readyz).
	Ping(ctx context.Context) error
}

// AppliedStore is a [Store] that keeps commands' applied records
// ([Applied]) with their entities' state: a write (Save, Delete, and a
// [FencedStore]'s and a [BatchStore]'s writes) whose context carries a
// record (withApplied) writes it in the same atomic step as the state,
// unless a record of its key is kept already: then it writes nothing and
// fails with an error wrapping *[AlreadyAppliedError], before it compares
// revisions. Records are kept for their retention, across a delete of
// the state, and trimmed by the entity's later writes (expired ones
// first). Every store of this package is one.
type AppliedStore interface {
	Store
	// Record writes a alone, changing no state, if the stored revision is
	// expected (else it fails with ErrConflict): how a command that
	// changed nothing records its answer.
	Record(ctx context.Context, entityType, id string, expected uint64, a Applied) error
}

// Record is a stored document and its revision.
type Record struct {
	Data     []byte
	Revision uint64
}

// ErrConflict is wrapped by Save and Delete when the stored revision is not
// the expected one: someone else wrote first. It is
// components.ErrConflict, so that callers can test for it without
// importing this package.
var ErrConflict = components.ErrConflict
