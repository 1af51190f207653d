package entities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
)

var _ ChangeLog = (*MemoryStore)(nil)

// memLog is one shard's change log in a MemoryStore: the changes after
// the oldest kept, and the consumers' checkpoints.
type memLog struct {
	head        uint64   // the last change's Seq
	changes     []Change // Seq head-len(changes)+1 .. head
	checkpoints map[string]uint64
}

// SetChangeLogLimit sets about how many changes each shard's log keeps at
// most (DefaultChangeLogLimit until then). Call it before the store is
// used.
func (s *MemoryStore) SetChangeLogLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = max(n, 1)
}

// record appends c to its shard's log, if a consumer registered there,
// and drops the oldest changes beyond the limit; it returns c as
// recorded (Seq 0: not recorded). s.mu is held.
func (s *MemoryStore) record(c Change) Change {
	l := s.logs[cluster.ShardOf(c.EntityType, c.EntityID)]
	if l == nil {
		return Change{}
	}
	l.head++
	c.Seq, c.At = l.head, time.Now()
	l.changes = append(l.changes, c)
	if over := len(l.changes) - s.limit; over > 0 {
		l.changes = slices.Delete(l.changes, 0, over)
	}
	return c
}

// Register implements [ChangeLog].
func (s *MemoryStore) Register(ctx context.Context, consumer string, shard int) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("register consumer %q on shard %d: %w", consumer, shard, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[shard]
	if l == nil {
		l = &memLog{checkpoints: make(map[string]uint64)}
		s.logs[shard] = l
	}
	if seq, ok := l.checkpoints[consumer]; ok {
		return seq, nil
	}
	l.checkpoints[consumer] = l.head
	return l.head, nil
}

// Checkpoint implements [ChangeLog].
func (s *MemoryStore) Checkpoint(ctx context.Context, consumer string, shard int) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("checkpoint of consumer %q on shard %d: %w", consumer, shard, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[shard]
	if l == nil {
		return 0, false, nil
	}
	seq, ok := l.checkpoints[consumer]
	return seq, ok, nil
}

// SaveCheckpoint implements [ChangeLog]; the fence is not checked.
func (s *MemoryStore) SaveCheckpoint(ctx context.Context, _ Fence, consumer string, shard int, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("save the checkpoint of consumer %q on shard %d: %w", consumer, shard, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[shard]
	if l == nil {
		return fmt.Errorf("save the checkpoint of consumer %q on shard %d: not registered", consumer, shard)
	}
	l.checkpoints[consumer] = seq
	lowest := seq
	for _, cp := range l.checkpoints {
		lowest = min(lowest, cp)
	}
	first := l.head - uint64(len(l.changes)) + 1
	if lowest >= first {
		l.changes = slices.Delete(l.changes, 0, int(min(lowest-first+1, uint64(len(l.changes)))))
	}
	return nil
}

// Changes implements [ChangeLog]. The changes' Data are copies.
func (s *MemoryStore) Changes(ctx context.Context, shard int, after uint64, limit int) ([]Change, uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, false, fmt.Errorf("read the changes of shard %d: %w", shard, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[shard]
	if l == nil || after >= l.head {
		return nil, after, false, nil
	}
	first := l.head - uint64(len(l.changes)) + 1
	missed := after+1 < first
	from := int(max(after+1, first) - first)
	out := slices.Clone(l.changes[from:min(from+limit, len(l.changes))])
	for i := range out {
		if out[i].Data != nil {
			out[i].Data = cloneData(out[i].Data)
		}
	}
	return out, l.head, missed, nil
}

// Current implements [ChangeLog].
func (s *MemoryStore) Current(ctx context.Context, shard int, entityType string, fn func(Change) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("read the states of shard %d: %w", shard, err)
	}
	s.mu.Lock()
	var states []Change
	for k, rec := range s.docs {
		if k.entityType == entityType && cluster.ShardOf(k.entityType, k.id) == shard {
			states = append(states, Change{EntityType: k.entityType, EntityID: k.id, Revision: rec.Revision, Data: cloneData(rec.Data)})
		}
	}
	s.mu.Unlock()
	for _, c := range states {
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// heard tells the watchers of c, unless it was not recorded (Seq 0).
func (s *MemoryStore) heard(c Change) {
	if c.Seq != 0 {
		s.watches.notify(cluster.ShardOf(c.EntityType, c.EntityID), c)
	}
}

// Watch implements [ChangeLog].
func (s *MemoryStore) Watch(fn func(shard int, c Change)) (stop func()) { return s.watches.add(fn) }

// watchers are a store's Watch functions. The list is copied on change,
// so that a write reads it with no lock.
type watchers struct {
	mu   sync.Mutex // serializes add and stop
	next int
	fns  atomic.Pointer[[]watcher]
}

type watcher struct {
	id int
	fn func(shard int, c Change)
}

// add adds fn; the returned function removes it.
func (w *watchers) add(fn func(shard int, c Change)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.next
	w.next++
	w.swap(func(list []watcher) []watcher { return append(list, watcher{id, fn}) })
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.swap(func(list []watcher) []watcher {
			return slices.DeleteFunc(list, func(x watcher) bool { return x.id == id })
		})
	}
}

// swap replaces the list with edit's result on a copy; w.mu is held.
func (w *watchers) swap(edit func([]watcher) []watcher) {
	var list []watcher
	if old := w.fns.Load(); old != nil {
		list = slices.Clone(*old)
	}
	list = edit(list)
	w.fns.Store(&list)
}

// notify calls every watcher with c, recorded in shard's log.
func (w *watchers) notify(shard int, c Change) {
	list := w.fns.Load()
	if list == nil {
		return
	}
	for _, x := range *list {
		x.fn(shard, c)
	}
}

var _ StateLister = (*MemoryStore)(nil)

// StateIDs implements [StateLister].
func (s *MemoryStore) StateIDs(ctx context.Context, entityType string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list the states of %q: %w", entityType, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return idsOf(s.docs, entityType), nil
}

// idsOf returns the ids of m's keys of entityType, sorted.
func idsOf[V any](m map[memKey]V, entityType string) []string {
	var ids []string
	for k := range m {
		if k.entityType == entityType {
			ids = append(ids, k.id)
		}
	}
	slices.Sort(ids)
	return ids
}

// States implements [StateLister].
func (s *MemoryStore) States(ctx context.Context, entityType string, ids []string, fn func(Change) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("read the states of %q: %w", entityType, err)
	}
	for _, id := range ids {
		s.mu.Lock()
		rec, ok := s.docs[memKey{entityType, id}]
		var data []byte
		if ok {
			data = cloneData(rec.Data)
		}
		s.mu.Unlock()
		if !ok {
			continue
		}
		if err := fn(Change{EntityType: entityType, EntityID: id, Revision: rec.Revision, Data: data}); err != nil {
			return err
		}
	}
	return nil
}
