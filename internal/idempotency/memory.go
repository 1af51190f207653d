package idempotency

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/api"
)

// MemoryStore is an api.IdempotencyStore in memory, for one instance on
// the embedded store: its records expire on its clock, and are lost when
// the process stops, as the embedded store's entities are.
type MemoryStore struct {
	clock clockwork.Clock

	mu      sync.Mutex
	records map[string]memoryRecord
	sweep   time.Time // when expired records were last removed
}

type memoryRecord struct {
	rec     api.IdempotencyRecord
	expires time.Time
}

var _ api.IdempotencyHolderStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store on clock (the real one when nil).
func NewMemoryStore(clock clockwork.Clock) *MemoryStore {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &MemoryStore{clock: clock, records: map[string]memoryRecord{}}
}

// Claim implements api.IdempotencyStore.
func (s *MemoryStore) Claim(ctx context.Context, scope, key, digest string, ttl time.Duration) (*api.IdempotencyRecord, error) {
	return s.ClaimAs(ctx, scope, key, digest, "", "", ttl)
}

// ClaimAs implements api.IdempotencyHolderStore.
func (s *MemoryStore) ClaimAs(_ context.Context, scope, key, digest, holder, takeFrom string, ttl time.Duration) (*api.IdempotencyRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.removeExpired(now)
	id := recordID(scope, key)
	if held, ok := s.live(id, now); ok && !reclaimable(held, digest, takeFrom) {
		return &held, nil
	}
	s.records[id] = memoryRecord{rec: api.IdempotencyRecord{State: api.IdempotencyInFlight, Digest: digest, Holder: holder},
		expires: now.Add(ttl)}
	return nil, nil
}

// Finish implements api.IdempotencyStore.
func (s *MemoryStore) Finish(_ context.Context, scope, key string, rec api.IdempotencyRecord, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	id := recordID(scope, key)
	if held, ok := s.live(id, now); ok && claimedBy(held, rec.Digest) {
		s.records[id] = memoryRecord{rec: rec, expires: now.Add(ttl)}
	}
	return nil
}

// Release implements api.IdempotencyStore.
func (s *MemoryStore) Release(_ context.Context, scope, key, digest string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := recordID(scope, key)
	if held, ok := s.live(id, s.clock.Now()); ok && claimedBy(held, digest) {
		delete(s.records, id)
	}
	return nil
}

// live is the unexpired record id; s.mu is held.
func (s *MemoryStore) live(id string, now time.Time) (api.IdempotencyRecord, bool) {
	r, ok := s.records[id]
	if !ok || !now.Before(r.expires) {
		return api.IdempotencyRecord{}, false
	}
	return r.rec, true
}

// sweepEvery is how often Claim removes the expired records.
const sweepEvery = time.Minute

// removeExpired drops the expired records, at most once per sweepEvery;
// s.mu is held.
func (s *MemoryStore) removeExpired(now time.Time) {
	if now.Sub(s.sweep) < sweepEvery {
		return
	}
	s.sweep = now
	for id, r := range s.records {
		if !now.Before(r.expires) {
			delete(s.records, id)
		}
	}
}

// reclaimable reports whether a claim for digest may replace held: an
// unknown outcome of the same request runs again, and a claim of the
// same request held by takeFrom (gone) is taken over.
func reclaimable(held api.IdempotencyRecord, digest, takeFrom string) bool {
	return held.Digest == digest && (held.State == api.IdempotencyUnknown ||
		takeFrom != "" && held.State == api.IdempotencyInFlight && held.Holder == takeFrom)
}

// claimedBy reports whether held is the claim of the request digest.
func claimedBy(held api.IdempotencyRecord, digest string) bool {
	return held.State == api.IdempotencyInFlight && held.Digest == digest
}

// recordID is the one string of a scope and a key (a scope has no NUL).
func recordID(scope, key string) string { return scope + "\x00" + key }
