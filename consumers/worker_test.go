package consumers_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/trellistest"
)

// countingLog is a memory store's change log that counts its reads and
// checkpoint saves, and lets its watchers hear only the changes hear
// lets through (a fault: a write whose reply was lost is not heard).
type countingLog struct {
	*entities.MemoryStore
	reads, saves atomic.Int64
	hear         func(entities.Change) bool
}

func (l *countingLog) Changes(ctx context.Context, shard int, after uint64, limit int) ([]entities.Change, uint64, bool, error) {
	l.reads.Add(1)
	return l.MemoryStore.Changes(ctx, shard, after, limit)
}

func (l *countingLog) SaveCheckpoint(ctx context.Context, f cluster.Fence, consumer string, shard int, seq uint64) error {
	l.saves.Add(1)
	return l.MemoryStore.SaveCheckpoint(ctx, f, consumer, shard, seq)
}

func (l *countingLog) Watch(fn func(int, entities.Change)) func() {
	return l.MemoryStore.Watch(func(shard int, c entities.Change) {
		if l.hear(c) {
			fn(shard, c)
		}
	})
}

// TestWorkerTakesChangesFromTheWrites: a worker handles the changes this
// instance's writes hand it without reading the log (but for a batch
// when it falls a hundred changes behind the writes), and saves its
// checkpoint far less often than once a change; a change it did not hear
// is read from the log at once (not at the next poll, an hour away),
// in order.
func TestWorkerTakesChangesFromTheWrites(t *testing.T) {
	const writes = 200
	tests := []struct {
		name      string
		hear      func(entities.Change) bool
		wantReads func(n int64) bool
	}{
		{"every change heard", func(entities.Change) bool { return true }, func(n int64) bool { return n <= writes/100+1 }},
		{"every other change lost", func(c entities.Change) bool { return c.Seq%2 == 0 }, func(n int64) bool { return n > 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &countingLog{MemoryStore: entities.NewMemoryStore(), hear: tt.hear}
			rec := newRecorder()
			r := runConsumer(t, consumers.Config{Log: log, Poll: time.Hour}, rec.handle)
			// Every worker reads its shard once as it starts.
			trellistest.Eventually(t, 10*time.Second, "each worker's first read", func() bool {
				return log.reads.Load() >= cluster.NumShards
			})
			reads, saves := log.reads.Load(), log.saves.Load()

			rev, err := uint64(0), error(nil)
			for v := 1; v <= writes; v++ {
				if rev, err = log.Save(t.Context(), "counter", "c-1", fmt.Appendf(nil, `{"id":"c-1","value":%d}`, v), rev); err != nil {
					t.Fatal(err)
				}
			}
			rec.waitCalls(t, writes)
			readsTaken := log.reads.Load() - reads
			waitCaughtUp(t, r)
			want := make([]int64, writes)
			for i := range want {
				want[i] = int64(i + 1)
			}
			wantSeen(t, rec, "c-1", want...)
			if !tt.wantReads(readsTaken) {
				t.Errorf("%d reads of the log for %d writes", readsTaken, writes)
			}
			if n := log.saves.Load() - saves; n > writes/2 {
				t.Errorf("%d checkpoint saves for %d changes, want at most one per %v", n, writes, 100*time.Millisecond)
			}
		})
	}
}
