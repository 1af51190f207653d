package entities

// MaxJitter is maxJitter, for the tests of package entities_test.
const MaxJitter = maxJitter

// MaxRoutes is how often a command follows its shard before it gives up.
const MaxRoutes = maxRoutes

// AppliedRecords is how many applied records the store keeps for an
// entity, expired ones not yet trimmed included.
func (s *MemoryStore) AppliedRecords(entityType, id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.applied[memKey{entityType, id}]; m != nil {
		return len(m.recs)
	}
	return 0
}
