package entities

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// memApplied is one entity's applied records in a MemoryStore: each
// record by its key, and each class's keys in the order they were made,
// which is the order they expire in (one retention per class).
type memApplied struct {
	recs  map[string]memAnswer
	order [2][]string // 'k' records, 'i' records
}

type memAnswer struct {
	answer  []byte
	expires time.Time
}

// SetClock makes the store tell the applied records' age on clock (the
// real clock by default). Call it before the store is used.
func (s *MemoryStore) SetClock(clock clockwork.Clock) { s.clock = clock }

// appliedAnswer is the unexpired answer of a's key for key's entity, when
// one is recorded. s.mu is held.
func (s *MemoryStore) appliedAnswer(key memKey, a *Applied, now time.Time) ([]byte, bool) {
	m := s.applied[key]
	if m == nil {
		return nil, false
	}
	rec, ok := m.recs[a.Key]
	if !ok || !now.Before(rec.expires) {
		return nil, false
	}
	return rec.answer, true
}

// recordApplied records a for key's entity, and first trims the entity's
// expired records: so an entity holds only the records of its retention
// period. s.mu is held.
func (s *MemoryStore) recordApplied(key memKey, a *Applied, now time.Time) {
	m := s.applied[key]
	if m == nil {
		m = &memApplied{recs: make(map[string]memAnswer)}
		s.applied[key] = m
	}
	m.trim(now)
	cls := classIndex(a.class())
	m.recs[a.Key] = memAnswer{answer: cloneData(a.Answer), expires: now.Add(a.Retention)}
	m.order[cls] = append(m.order[cls], a.Key)
}

// trim drops the records that expired, oldest first.
func (m *memApplied) trim(now time.Time) {
	for cls, keys := range m.order {
		n := 0
		for n < len(keys) {
			rec, ok := m.recs[keys[n]]
			if ok && now.Before(rec.expires) {
				break
			}
			if ok && classIndex(keys[n][0]) == cls {
				delete(m.recs, keys[n])
			}
			n++
		}
		clear(keys[:n])
		m.order[cls] = keys[n:]
	}
}

// classIndex is a record class's place in memApplied.order.
func classIndex(class byte) int {
	if class == 'k' {
		return 0
	}
	return 1
}
