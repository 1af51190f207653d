package runtime

// ShardingIdle reports whether entity id has a running actor that nothing
// runs and nothing waits for: a message to it now would wake it.
func ShardingIdle[T any](s *Sharding[T], id string) bool {
	sh := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[id]
	if e == nil || e.stopping {
		return false
	}
	c := e.cell
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == alive && !c.scheduled && !c.suspended && len(c.inbox) == 0
}

// Queued is how many user messages wait in the inbox of the actor behind
// ref (0 for a ref that is not a local actor).
func Queued[T any](ref Ref[T]) int {
	c, ok := ref.(*cell[T])
	if !ok {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inbox)
}
