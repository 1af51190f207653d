// Package shardwork keeps a runner's workers by name and shard: one per
// name (a consumer, a view) on each shard the instance serves, each
// started under the shard's fence. The consumers and the views both run
// their work so.
package shardwork

import (
	"iter"
	"maps"

	"github.com/trellis-go/trellis/internal/cluster"
)

// Shards says which shards the instance serves now, and under which
// fence.
type Shards interface {
	Serving(shard int) (cluster.Fence, bool)
}

// Key names a worker: its name and shard.
type Key struct {
	Name  string
	Shard int
}

// Set is the workers W of a runner. It is not safe for concurrent use:
// the runner's lock guards it.
type Set[W comparable] struct {
	shards    Shards
	fence     func(W) cluster.Fence
	halt      func(W)
	changed   func(shard int)
	workers   map[Key]W
	releasing map[int]cluster.Fence // shards being handed over, under this fence
}

// New returns an empty Set over shards (nil: every shard, under no
// fence): fence is a worker's fence, halt stops one (without waiting),
// changed (nil: none) is called once a shard's workers changed.
func New[W comparable](shards Shards, fence func(W) cluster.Fence, halt func(W), changed func(shard int)) *Set[W] {
	return &Set[W]{shards: shards, fence: fence, halt: halt, changed: changed,
		workers: make(map[Key]W), releasing: make(map[int]cluster.Fence)}
}

// Serving is Shards.Serving, or every shard under no fence.
func (s *Set[W]) Serving(shard int) (cluster.Fence, bool) {
	if s.shards == nil {
		return cluster.Fence{}, true
	}
	return s.shards.Serving(shard)
}

// Pass is one look at the shards: for each name, a worker on each shard
// served (and not being handed over), started by start under the
// shard's fence (prev is the one it replaces, halted, of an older fence;
// zero when none); the workers of a shard no longer served are halted
// and removed.
func (s *Set[W]) Pass(names []string, start func(name string, shard int, f cluster.Fence, prev W) W) {
	var zero W
	for shard := range cluster.NumShards {
		f, serving := s.Serving(shard)
		if rf, ok := s.releasing[shard]; ok && (!serving || rf == f) {
			serving = false
		} else if ok {
			delete(s.releasing, shard) // taken again, under a new fence
		}
		for _, name := range names {
			key := Key{name, shard}
			w := s.workers[key]
			switch {
			case serving && (w == zero || s.fence(w) != f):
				if w != zero {
					s.halt(w)
				}
				s.set(key, start(name, shard, f, w))
			case !serving && w != zero:
				s.halt(w) // the lease lapsed: its writes are fenced
				s.set(key, zero)
			}
		}
	}
}

// Release marks shard as handed over (its workers start again only under
// another fence) and removes its workers of names, which it returns for
// the caller to halt and wait for.
func (s *Set[W]) Release(shard int, names []string) []W {
	if f, ok := s.Serving(shard); ok {
		s.releasing[shard] = f
	}
	var zero W
	var ws []W
	for _, name := range names {
		key := Key{name, shard}
		if w := s.workers[key]; w != zero {
			ws = append(ws, w)
			s.set(key, zero)
		}
	}
	return ws
}

// TakeAll removes every worker, and returns them.
func (s *Set[W]) TakeAll() []W {
	var zero W
	ws := make([]W, 0, len(s.workers))
	for key, w := range s.workers {
		ws = append(ws, w)
		s.set(key, zero)
	}
	return ws
}

// Get is the worker of name on shard; zero when none.
func (s *Set[W]) Get(name string, shard int) W { return s.workers[Key{name, shard}] }

// All is every worker, by key.
func (s *Set[W]) All() iter.Seq2[Key, W] { return maps.All(s.workers) }

func (s *Set[W]) set(key Key, w W) {
	var zero W
	if w != zero {
		s.workers[key] = w
	} else {
		delete(s.workers, key)
	}
	if s.changed != nil {
		s.changed(key.Shard)
	}
}
