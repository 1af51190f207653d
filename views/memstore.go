package views

import (
	"context"
	"crypto/rand"
	"slices"
	"sort"
	"sync"

	"github.com/trellis-go/trellis/internal/cluster"
)

// memoryStore keeps views in the process's memory, with the embedded
// entity store (not durable). Each query's index is one sorted slice for
// the view.
type memoryStore struct {
	mu    sync.Mutex
	views map[string]*memView
	key   []byte
	gens  map[string]generation
}

// memView is one generation of a view.
type memView struct {
	seq   uint64 // the write counter: one more per apply
	pos   [numShards]uint64
	built [numShards]bool
	feed  [numShards][]rowChange
	floor [numShards]uint64
	rows  map[string]*memRow
	idx   [][]memEntry // per query, sorted by key
}

type memRow struct {
	shard int
	row   []byte
	keys  []string
	since []uint64
}

type memEntry struct {
	key, id string
	since   uint64
}

// NewMemoryStore returns a Store in memory, for the embedded entity
// store.
func NewMemoryStore() Store {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return &memoryStore{views: make(map[string]*memView), key: key}
}

func (s *memoryStore) generation(ctx context.Context, view string) (generation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gens[view], ctx.Err()
}

func (s *memoryStore) setGeneration(ctx context.Context, view string, prev, next generation) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gens == nil {
		s.gens = make(map[string]generation)
	}
	if encodeGen(s.gens[view]) != encodeGen(prev) {
		return false, ctx.Err()
	}
	s.gens[view] = next
	return true, ctx.Err()
}

// sealKey is the store's own: its tokens do not outlive it, nor do its
// rows.
func (s *memoryStore) sealKey(context.Context) ([]byte, error) { return s.key, nil }

// view is d's generation; s.mu is held.
func (s *memoryStore) view(d *viewDef) *memView {
	v := s.views[d.gen]
	if v == nil {
		v = &memView{rows: make(map[string]*memRow), idx: make([][]memEntry, len(d.queries))}
		s.views[d.gen] = v
	}
	return v
}

func (s *memoryStore) position(ctx context.Context, view string, shard int) (uint64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[view]
	if v == nil {
		return 0, false, ctx.Err()
	}
	return v.pos[shard], v.built[shard], ctx.Err()
}

func (s *memoryStore) builtShards(ctx context.Context, view string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if v := s.views[view]; v != nil {
		for _, built := range v.built {
			if built {
				n++
			}
		}
	}
	return n, ctx.Err()
}

func (s *memoryStore) positions(ctx context.Context, view string) ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, numShards)
	if v := s.views[view]; v != nil {
		copy(out, v.pos[:])
	}
	return out, ctx.Err()
}

// open is position: one process writes the embedded store, and fences
// are not kept.
func (s *memoryStore) open(ctx context.Context, _ cluster.Fence, d *viewDef, shard int) (uint64, bool, error) {
	return s.position(ctx, d.gen, shard)
}

func (s *memoryStore) apply(ctx context.Context, _ cluster.Fence, d *viewDef, shard int, ops []rowOp, mode applyMode, to uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.view(d)
	if mode == modeApply && v.built[shard] && v.pos[shard] >= to {
		return nil
	}
	v.seq++
	for _, op := range ops {
		old := v.rows[op.id]
		if mode == modeApply && (old != nil || op.row != nil) {
			c := rowChange{seq: op.since, id: op.id, row: op.row, new: op.keys}
			if old != nil {
				c.old = old.keys
			}
			v.feed[shard] = append(v.feed[shard], c)
		}
		if op.row == nil {
			if old != nil {
				for q, k := range old.keys {
					v.idx[q] = removeEntry(v.idx[q], k)
				}
				delete(v.rows, op.id)
			}
			continue
		}
		r := &memRow{shard: shard, row: op.row, keys: op.keys, since: make([]uint64, len(op.keys))}
		for q, k := range op.keys {
			if old != nil && old.keys[q] == k {
				r.since[q] = old.since[q]
				continue
			}
			if old != nil {
				v.idx[q] = removeEntry(v.idx[q], old.keys[q])
			}
			r.since[q] = v.seq
			v.idx[q] = insertEntry(v.idx[q], memEntry{key: k, id: op.id, since: v.seq})
		}
		v.rows[op.id] = r
	}
	switch {
	case mode == modeApply && to > feedWindow:
		cut := to - feedWindow
		if f := v.feed[shard]; len(f) > 0 && f[0].seq <= cut {
			i := sort.Search(len(f), func(i int) bool { return f[i].seq > cut })
			v.feed[shard] = slices.Clone(f[i:])
		}
		v.floor[shard] = cut
	case mode == modeBuilt:
		v.feed[shard], v.floor[shard] = nil, to
	}
	if mode != modeBuild {
		v.pos[shard], v.built[shard] = to, true
	}
	return nil
}

func (s *memoryStore) feed(ctx context.Context, d *viewDef, after []uint64, limit int) ([]shardFeed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.view(d)
	out := make([]shardFeed, len(after))
	for i := range after {
		out[i].pos, out[i].floor = v.pos[i], v.floor[i]
		f := v.feed[i]
		j := sort.Search(len(f), func(j int) bool { return f[j].seq > after[i] })
		out[i].changes = slices.Clone(f[j:min(len(f), j+limit)])
	}
	return out, nil
}

func find(idx []memEntry, key string) int {
	return sort.Search(len(idx), func(i int) bool { return idx[i].key >= key })
}

func removeEntry(idx []memEntry, key string) []memEntry {
	if i := find(idx, key); i < len(idx) && idx[i].key == key {
		return slices.Delete(idx, i, i+1)
	}
	return idx
}

func insertEntry(idx []memEntry, e memEntry) []memEntry {
	return slices.Insert(idx, find(idx, e.key), e)
}

func (s *memoryStore) rows(ctx context.Context, d *viewDef, ids []string) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.view(d)
	out := make(map[string][]byte, len(ids))
	for _, id := range ids {
		if r := v.rows[id]; r != nil {
			out[id] = r.row
		}
	}
	return out, ctx.Err()
}

// ids walks every row of the view: the embedded store holds few.
func (s *memoryStore) ids(ctx context.Context, d *viewDef, shard int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, r := range s.view(d).rows {
		if r.shard == shard {
			ids = append(ids, id)
		}
	}
	return ids, ctx.Err()
}

func (s *memoryStore) scan(ctx context.Context, d *viewDef, qi int, b bounds, snapshot int64, positions bool) (scanned, error) {
	if err := ctx.Err(); err != nil {
		return scanned{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.view(d)
	out := scanned{seq: v.seq}
	if snapshot >= 0 {
		out.seq = uint64(snapshot)
	}
	if positions {
		out.pos = slices.Clone(v.pos[:])
	}
	idx := v.idx[qi]
	take := func(e memEntry) bool {
		if e.since <= out.seq {
			out.rows = append(out.rows, entry{key: e.key, id: e.id, row: v.rows[e.id].row})
		}
		return len(out.rows) <= b.limit
	}
	if b.desc {
		for j := sort.Search(len(idx), func(j int) bool { return aboveHi(idx[j].key, b.hi) }) - 1; j >= 0 && !below(idx[j].key, b.lo) && take(idx[j]); j-- {
		}
	} else {
		for j := sort.Search(len(idx), func(j int) bool { return !below(idx[j].key, b.lo) }); j < len(idx) && !aboveHi(idx[j].key, b.hi) && take(idx[j]); j++ {
		}
	}
	return out, nil
}
