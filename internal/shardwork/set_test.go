package shardwork_test

import (
	"testing"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/shardwork"
)

// served serves the shards it maps, each under its fence.
type served map[int]cluster.Fence

func (s served) Serving(shard int) (cluster.Fence, bool) {
	f, ok := s[shard]
	return f, ok
}

type worker struct {
	name   string
	shard  int
	fence  cluster.Fence
	halted bool
}

// TestSetPass: a worker per name on each shard served, replaced under a
// new fence, halted when the shard is no longer served; a shard released
// is not worked on again under the same fence, and is under a new one.
func TestSetPass(t *testing.T) {
	f1, f2 := cluster.Fence{Epoch: 1, Incarnation: "a"}, cluster.Fence{Epoch: 2, Incarnation: "b"}
	shards := served{3: f1, 7: f1}
	changed := map[int]int{}
	set := shardwork.New(shards, func(w *worker) cluster.Fence { return w.fence }, func(w *worker) { w.halted = true },
		func(shard int) { changed[shard]++ })
	started := 0
	start := func(name string, shard int, f cluster.Fence, _ *worker) *worker {
		started++
		return &worker{name: name, shard: shard, fence: f}
	}
	names := []string{"a", "b"}
	count := func() int {
		n := 0
		for range set.All() {
			n++
		}
		return n
	}
	steps := []struct {
		name          string
		do            func()
		workers, runs int
	}{
		{"two shards served", func() {}, 4, 4},
		{"a pass again changes nothing", func() {}, 4, 4},
		{"shard 7 under a new fence", func() { shards[7] = f2 }, 4, 6},
		{"shard 3 no longer served", func() { delete(shards, 3) }, 2, 6},
		{"shard 7 released", func() {
			for _, w := range set.Release(7, names) {
				w.halted = true
			}
		}, 0, 6},
		{"shard 7 taken again under the same fence: not worked on", func() {}, 0, 6},
		{"shard 7 under a newer fence", func() { shards[7] = cluster.Fence{Epoch: 3, Incarnation: "c"} }, 2, 8},
	}
	for _, st := range steps {
		st.do()
		set.Pass(names, start)
		if got := count(); got != st.workers || started != st.runs {
			t.Fatalf("%s: %d workers, %d started; want %d, %d", st.name, got, started, st.workers, st.runs)
		}
	}
	old := set.Get("a", 7)
	ws := set.TakeAll()
	if len(ws) != 2 || count() != 0 || set.Get("a", 7) != nil || old == nil {
		t.Fatalf("TakeAll: %d workers, %d left", len(ws), count())
	}
	if changed[3] == 0 || changed[7] == 0 {
		t.Errorf("changed called %v, want for shards 3 and 7", changed)
	}
}
