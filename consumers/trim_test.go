package consumers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

// startRunner runs rec's consumer of counters on store, alone.
func startRunner(t *testing.T, store *entities.MemoryStore, rec *recorder) *consumers.Runner {
	t.Helper()
	return runConsumer(t, consumers.Config{Log: store}, rec.handle)
}

// runConsumer runs a consumer of counters with handle on a runner of
// cfg (with a client and memory dead letters unless cfg has them),
// stopped at the test's end.
func runConsumer(t *testing.T, cfg consumers.Config, handle func(*consumers.Ctx, consumers.Change[counter.Counter]) consumers.Effect) *consumers.Runner {
	t.Helper()
	if cfg.Client == nil {
		cfg.Client = components.NewClient(components.NewRegistry())
	}
	if cfg.DeadLetters == nil {
		cfg.DeadLetters = consumers.NewMemoryDeadLetters()
	}
	r, err := consumers.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := consumers.Define("counter-log", counter.Entity, handle).Start(r); err != nil {
		t.Fatal(err)
	}
	r.Start(t.Context())
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// waitCaughtUp waits until r's consumers have handled every change.
func waitCaughtUp(t *testing.T, r *consumers.Runner) {
	t.Helper()
	trellistest.Eventually(t, 10*time.Second, "the consumer to catch up", func() bool {
		n, err := r.Behind(t.Context())
		return err == nil && n == 0
	})
}

// TestTrimmingWithAStoppedConsumer: while a consumer is stopped, the log
// stays within its bound however many writes come; started again, the
// consumer is behind the bound and catches up from the current states:
// it sees each counter's latest value, in order after what it saw before.
func TestTrimmingWithAStoppedConsumer(t *testing.T) {
	const limit = 10
	store := entities.NewMemoryStore()
	store.SetChangeLogLimit(limit)
	ctx := t.Context()
	revs := map[string]uint64{}
	write := func(id string, value int) {
		rev, err := store.Save(ctx, "counter", id, fmt.Appendf(nil, `{"id":%q,"value":%d}`, id, value), revs[id])
		if err != nil {
			t.Fatal(err)
		}
		revs[id] = rev
	}
	rec := newRecorder()
	r := startRunner(t, store, rec)
	for _, id := range ids(12) {
		write(id, 1)
	}
	waitCaughtUp(t, r)
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for v := 2; v <= 200; v++ {
		for _, id := range ids(12) {
			write(id, v)
		}
	}
	for shard := range cluster.NumShards {
		changes, _, _, err := store.Changes(ctx, shard, 0, 1000)
		if err != nil || len(changes) > limit {
			t.Fatalf("shard %d keeps %d changes (%v) while the consumer is stopped, over the bound %d", shard, len(changes), err, limit)
		}
	}
	waitCaughtUp(t, startRunner(t, store, rec))
	for _, id := range ids(12) {
		wantSeen(t, rec, id, 1, 200)
	}
}

// TestTrimmingWithALiveConsumer: on Redis, with a live consumer, every
// shard's log is trimmed to nothing once the consumer has caught up.
func TestTrimmingWithALiveConsumer(t *testing.T) {
	rec := newRecorder()
	instances := trellistest.StartInstances(t, 1, app(rec))
	ts := instances[0]
	trellistest.WaitSettled(t, ts)
	for range 5 {
		for _, id := range ids(100) {
			increase(t, ts, id)
		}
	}
	ts.WaitConsumers(t)
	rdb, prefix := ts.Host().Redis, ts.Host().Config.RedisPrefix
	total := int64(0)
	for shard := range cluster.NumShards {
		n, err := rdb.XLen(t.Context(), prefix+":entity:{"+cluster.ShardTag(shard)+"}:changes").Result()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 0 {
		t.Fatalf("%d changes left in the logs after the consumer caught up, want 0", total)
	}
	for _, id := range ids(100) {
		wantSeen(t, rec, id, 1, 2, 3, 4, 5)
	}
}
