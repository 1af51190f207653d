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
// entity store (not durable). Each query's index is a sorted slice.
type memoryStore struct {
	mu    sync.Mutex
	views map[string]*[numShards]*memShard
	key   []byte
	gens  map[string]generation
}

type memShard struct {
	pos   uint64
	built bool
	feed  []rowChange
	floor uint64
	rows  map[string]*memRow
	idx   [][]memEntry // per query, sorted by key
}

type memRow struct {
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
	return &memoryStore{views: make(map[string]*[numShards]*memShard), key: key}
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

// shard is view's shard; s.mu is held.
func (s *memoryStore) shard(d *viewDef, shard int) *memShard {
	v := s.views[d.gen]
	if v == nil {
		v = new([numShards]*memShard)
		s.views[d.gen] = v
	}
	if v[shard] == nil {
		v[shard] = &memShard{rows: make(map[string]*memRow), idx: make([][]memEntry, len(d.queries))}
	}
	return v[shard]
}

func (s *memoryStore) position(ctx context.Context, view string, shard int) (uint64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[view]
	if v == nil || v[shard] == nil {
		return 0, false, ctx.Err()
	}
	return v[shard].pos, v[shard].built, ctx.Err()
}

func (s *memoryStore) apply(ctx context.Context, _ cluster.Fence, d *viewDef, shard int, ops []rowOp, mode applyMode, to uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shard(d, shard)
	if mode == modeApply && sh.built && sh.pos >= to {
		return nil
	}
	for _, op := range ops {
		old := sh.rows[op.id]
		if mode == modeApply && (old != nil || op.row != nil) {
			c := rowChange{seq: op.since, id: op.id, row: op.row, new: op.keys}
			if old != nil {
				c.old = old.keys
			}
			sh.feed = append(sh.feed, c)
		}
		if op.row == nil {
			if old != nil {
				for q, k := range old.keys {
					sh.idx[q] = removeEntry(sh.idx[q], k)
				}
				delete(sh.rows, op.id)
			}
			continue
		}
		r := &memRow{row: op.row, keys: op.keys, since: make([]uint64, len(op.keys))}
		for q, k := range op.keys {
			if old != nil && old.keys[q] == k {
				r.since[q] = old.since[q]
				continue
			}
			if old != nil {
				sh.idx[q] = removeEntry(sh.idx[q], old.keys[q])
			}
			r.since[q] = op.since
			sh.idx[q] = insertEntry(sh.idx[q], memEntry{key: k, id: op.id, since: op.since})
		}
		sh.rows[op.id] = r
	}
	switch {
	case mode == modeApply && to > feedWindow:
		cut := to - feedWindow
		if len(sh.feed) > 0 && sh.feed[0].seq <= cut {
			i := sort.Search(len(sh.feed), func(i int) bool { return sh.feed[i].seq > cut })
			sh.feed = slices.Clone(sh.feed[i:])
		}
		sh.floor = cut
	case mode == modeBuilt:
		sh.feed, sh.floor = nil, to
	}
	if mode != modeBuild {
		sh.pos, sh.built = to, true
	}
	return nil
}

func (s *memoryStore) feed(ctx context.Context, d *viewDef, after []uint64, limit int) ([]shardFeed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]shardFeed, len(after))
	for i := range after {
		sh := s.shard(d, i)
		out[i].pos, out[i].floor = sh.pos, sh.floor
		j := sort.Search(len(sh.feed), func(j int) bool { return sh.feed[j].seq > after[i] })
		out[i].changes = slices.Clone(sh.feed[j:min(len(sh.feed), j+limit)])
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

func (s *memoryStore) ids(ctx context.Context, d *viewDef, shard int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.shard(d, shard).rows {
		ids = append(ids, id)
	}
	return ids, ctx.Err()
}

func (s *memoryStore) scan(ctx context.Context, d *viewDef, qi int, b bounds, shards []int, snapshots []int64) ([]shardRows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]shardRows, len(shards))
	for i, shard := range shards {
		sh := s.shard(d, shard)
		snap := sh.pos
		if snapshots[i] >= 0 {
			snap = uint64(snapshots[i])
		}
		out[i].pos = snap
		idx := sh.idx[qi]
		take := func(e memEntry) bool {
			if e.since <= snap {
				out[i].rows = append(out[i].rows, entry{key: e.key, id: e.id, row: sh.rows[e.id].row})
			}
			return len(out[i].rows) <= b.limit
		}
		if b.desc {
			for j := sort.Search(len(idx), func(j int) bool { return aboveHi(idx[j].key, b.hi) }) - 1; j >= 0 && !below(idx[j].key, b.lo) && take(idx[j]); j-- {
			}
		} else {
			for j := sort.Search(len(idx), func(j int) bool { return !below(idx[j].key, b.lo) }); j < len(idx) && !aboveHi(idx[j].key, b.hi) && take(idx[j]); j++ {
			}
		}
	}
	return out, nil
}
