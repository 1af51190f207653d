package entities_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// memCycles is how many create/delete cycles TestShardedRedisStoreMemoryFlat
// runs: go test ./entities -run MemoryFlat -cycles=1000000 for the full
// figure.
var memCycles = flag.Int("cycles", 100_000, "create/delete cycles of TestShardedRedisStoreMemoryFlat")

// TestShardedRedisStoreConformance runs the Store suite on the sharded
// store, on one Redis and on a Redis Cluster, every write under the fence
// of a member that owns the entity's shard.
func TestShardedRedisStoreConformance(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			runStoreConformance(t, func(t *testing.T) entities.Store {
				prefix := newTestPrefix()
				s := newTestShardedStore(t, client, prefix)
				return &fencedWriter{ShardedRedisStore: s, owner: joinOwner(t, client, prefix, "owner")}
			})
		})
	}
}

// TestShardedRedisStoreFence: a write under a fence that is no longer the
// shard's (its owner released it, another took it) is refused with
// ErrFenced and changes nothing; the new owner's fence writes.
func TestShardedRedisStoreFence(t *testing.T) {
	onEachTarget(t, func(t *testing.T, ctx context.Context, client redis.UniversalClient, prefix string, s *entities.ShardedRedisStore) {
		a, b := joinOwner(t, client, prefix, "a"), joinOwner(t, client, prefix, "b")
		shard := cluster.ShardOf("counter", "c-1")

		old := a.fence(t, shard)
		rev, err := s.SaveFenced(ctx, old, "counter", "c-1", []byte(`{"value":1}`), 0)
		if err != nil {
			t.Fatalf("SaveFenced by the owner: %v", err)
		}
		if err := a.m.Release(ctx, old); err != nil {
			t.Fatalf("Release: %v", err)
		}
		// Released: refused, though no one owns the shard yet.
		wantFenced(t, "save after the release", saveFencedErr(ctx, s, old, `{"value":9}`, rev))
		takeover := b.fence(t, shard)
		if takeover.Epoch != old.Epoch+1 {
			t.Fatalf("takeover fence %+v, want epoch %d", takeover, old.Epoch+1)
		}
		wantFenced(t, "save after the takeover", saveFencedErr(ctx, s, old, `{"value":9}`, rev))
		wantFenced(t, "delete after the takeover", s.DeleteFenced(ctx, old, "counter", "c-1", rev))
		wantFenced(t, "save under another shard's fence",
			saveFencedErr(ctx, s, cluster.Fence{Shard: (shard + 1) % cluster.NumShards, Incarnation: "x", Epoch: 1}, `{}`, rev))
		wantFenced(t, "save without a fence", saveErr(ctx, s, "counter", "c-1", `{}`, rev))
		wantRecord(t, ctx, s, "counter", "c-1", `{"value":1}`, rev)

		rev2, err := s.SaveFenced(ctx, takeover, "counter", "c-1", []byte(`{"value":2}`), rev)
		if err != nil || rev2 <= rev {
			t.Fatalf("SaveFenced by the new owner = %d, %v; want a revision above %d", rev2, err, rev)
		}
		wantRecord(t, ctx, s, "counter", "c-1", `{"value":2}`, rev2)
	})
}

// TestShardedRedisStoreKeyLayout pins the layout documented on
// ShardedRedisStore: one hash per entity in its shard's slot, the shard's
// counter beside it, and nothing left by a delete.
func TestShardedRedisStoreKeyLayout(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	s := newTestShardedStore(t, client, prefix)
	owner := joinOwner(t, client, prefix, "owner")
	shard := cluster.ShardOf("a:b", "c")
	tag := "{" + cluster.ShardTag(shard) + "}"
	key := prefix + ":entity:" + tag + ":3:a:b:c"
	counter := prefix + ":entity:" + tag + ":revs"
	f := owner.fence(t, shard)

	rev, err := s.SaveFenced(ctx, f, "a:b", "c", []byte(`{"x":1}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := client.HGetAll(ctx, key).Val(); got["data"] != `{"x":1}` || got["rev"] != strconv.FormatUint(rev, 10) || len(got) != 2 {
		t.Fatalf("state hash = %v, want data and rev %d", got, rev)
	}
	if got := client.Get(ctx, counter).Val(); got != strconv.FormatUint(rev, 10) {
		t.Fatalf("counter = %q, want %d", got, rev)
	}
	if err := s.DeleteFenced(ctx, f, "a:b", "c", rev); err != nil {
		t.Fatal(err)
	}
	keys := client.Keys(ctx, prefix+":entity:*").Val()
	if len(keys) != 1 || keys[0] != counter {
		t.Fatalf("entity keys after the delete = %v, want only the counter %s", keys, counter)
	}
}

// TestShardedRedisStoreLargeCounters: revisions and change seqs are
// exact however large the shard's counters are: past 10^14, where Lua
// writes a number as 1e+14, and past 2^53, where a Lua number is no longer
// exact; by a single write and by a batch.
func TestShardedRedisStoreLargeCounters(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	for _, before := range []uint64{99_999_999_999_998, 1<<53 - 2, 1<<53 + 9, math.MaxInt64 - 3} {
		t.Run(strconv.FormatUint(before, 10), func(t *testing.T) {
			prefix := newTestPrefix()
			s := newTestShardedStore(t, client, prefix)
			owner := joinOwner(t, client, prefix, "owner")
			shard := cluster.ShardOf("counter", "c-1")
			tag := "{" + cluster.ShardTag(shard) + "}"
			for _, counter := range []string{"revs", "changes:seq"} {
				if err := client.Set(ctx, prefix+":entity:"+tag+":"+counter, before, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Register(ctx, "reader", shard); err != nil {
				t.Fatal(err)
			}
			f := owner.fence(t, shard)
			rev, err := s.SaveFenced(ctx, f, "counter", "c-1", []byte(`{"n":1}`), 0)
			if err != nil || rev != before+1 {
				t.Fatalf("SaveFenced = %d, %v; want revision %d", rev, err, before+1)
			}
			revs, err := s.SaveFencedBatch(ctx, f, "counter", "c-1",
				[]entities.Update{{Data: []byte(`{"n":2}`)}, {Data: []byte(`{"n":3}`)}}, rev)
			if err != nil || !slices.Equal(revs, []uint64{before + 2, before + 3}) {
				t.Fatalf("SaveFencedBatch = %v, %v; want revisions %d and %d", revs, err, before+2, before+3)
			}
			wantRecord(t, ctx, s, "counter", "c-1", `{"n":3}`, before+3)
			changes, head, _, err := s.Changes(ctx, shard, before, 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range changes {
				got = append(got, fmt.Sprintf("%d r%d", c.Seq, c.Revision))
			}
			want := []string{fmt.Sprintf("%d r%d", before+1, before+1), fmt.Sprintf("%d r%d", before+2, before+2),
				fmt.Sprintf("%d r%d", before+3, before+3)}
			if !slices.Equal(got, want) || head != before+3 {
				t.Fatalf("Changes = %q head %d, want %q head %d", got, head, want, before+3)
			}
		})
	}
}

// TestShardedJournalLargeSeqs: a journal's trim is exact however large
// its seqs are (past 10^14, where Lua writes a number as 1e+14).
func TestShardedJournalLargeSeqs(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	s := newTestShardedStore(t, client, prefix)
	owner := joinOwner(t, client, prefix, "owner")
	const typ, id, before = "wallet", "w-1", uint64(99_999_999_999_998)
	tag := "{" + cluster.ShardTag(cluster.ShardOf(typ, id)) + "}"
	head := prefix + ":journal:" + tag + ":" + strconv.Itoa(len(typ)) + ":" + typ + ":" + id
	if err := client.HSet(ctx, head, "seq", before).Err(); err != nil {
		t.Fatal(err)
	}
	snap := &entities.Snapshot{Seq: before + 2, Data: []byte(`{}`), At: time.UnixMilli(1_700_000_000_000)}
	f := owner.fence(t, cluster.ShardOf(typ, id))
	if err := s.Append(ctx, f, typ, id, entities.JournalWrite{Expected: before, Events: evs(before+1, before+2), Snapshot: snap}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, f, typ, id, entities.JournalWrite{Expected: before + 2, Events: evs(before+3, before+4), TrimThrough: before + 1}); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, ctx, s, typ, id, 0, 100, evs(before+2, before+4))
}

// TestShardedRedisStoreUpgrade: states of RedisStore's layout are read,
// moved to the new layout by the next write (the legacy key deleted
// after), and deleted with it; tombstones read as absent and their
// revisions are never given again.
func TestShardedRedisStoreUpgrade(t *testing.T) {
	onEachTarget(t, func(t *testing.T, ctx context.Context, client redis.UniversalClient, prefix string, s *entities.ShardedRedisStore) {
		old := entities.NewRedisStore(client, prefix)
		w := &fencedWriter{ShardedRedisStore: s, owner: joinOwner(t, client, prefix, "owner")}
		legacyKey := func(id string) string { return prefix + ":entity:7:counter:" + id }

		// A live legacy state, at revision 3: read, then moved by an update.
		rev := mustSave(t, ctx, old, "counter", "live", `{"value":1}`, 0)
		rev = mustSave(t, ctx, old, "counter", "live", `{"value":2}`, rev)
		rev = mustSave(t, ctx, old, "counter", "live", `{"value":3}`, rev)
		wantRecord(t, ctx, w, "counter", "live", `{"value":3}`, rev)
		wantConflict(t, "update of a legacy state with a wrong revision", saveErr(ctx, w, "counter", "live", `{}`, rev-1))
		moved := mustSave(t, ctx, w, "counter", "live", `{"value":4}`, rev)
		if moved <= rev {
			t.Fatalf("moved state got revision %d, want above the legacy %d", moved, rev)
		}
		wantNoKey(t, ctx, client, legacyKey("live"))
		wantRecord(t, ctx, w, "counter", "live", `{"value":4}`, moved)

		// A legacy tombstone at revision 2: absent; a create goes above it.
		rev = mustSave(t, ctx, old, "counter", "gone", `{}`, 0)
		rev = mustSave(t, ctx, old, "counter", "gone", `{}`, rev)
		mustDelete(t, ctx, old, "counter", "gone", rev)
		wantAbsent(t, ctx, w, "counter", "gone")
		mustSave(t, ctx, old, "counter", "live2", `{}`, 0)
		wantConflict(t, "create over a live legacy state", saveErr(ctx, w, "counter", "live2", `{}`, 0))
		created := mustSave(t, ctx, w, "counter", "gone", `{}`, 0)
		if created <= rev {
			t.Fatalf("created state got revision %d, want above the tombstone's %d", created, rev)
		}
		wantNoKey(t, ctx, client, legacyKey("gone"))

		// A legacy state deleted through the new store leaves nothing.
		rev = mustSave(t, ctx, old, "counter", "del", `{}`, 0)
		mustDelete(t, ctx, w, "counter", "del", rev)
		wantAbsent(t, ctx, w, "counter", "del")
		wantNoKey(t, ctx, client, legacyKey("del"))

		// A crash between the two steps left both keys: a delete
		// removes both, and the legacy state never comes back.
		newRev := mustSave(t, ctx, w, "counter", "crash", `{"new":1}`, 0)
		if err := client.HSet(ctx, legacyKey("crash"), "data", `{"old":1}`, "rev", "1").Err(); err != nil {
			t.Fatal(err)
		}
		wantRecord(t, ctx, w, "counter", "crash", `{"new":1}`, newRev)
		mustDelete(t, ctx, w, "counter", "crash", newRev)
		wantAbsent(t, ctx, w, "counter", "crash")
	})
}

// onEachTarget runs test on one Redis and on a Redis Cluster, each time
// with a sharded store under a prefix of its own.
func onEachTarget(t *testing.T, test func(t *testing.T, ctx context.Context, client redis.UniversalClient, prefix string, s *entities.ShardedRedisStore)) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			prefix := newTestPrefix()
			test(t, t.Context(), client, prefix, newTestShardedStore(t, client, prefix))
		})
	}
}

// TestShardedRedisStoreMemoryFlat: create/delete cycles leave Redis's
// memory where it was, since a delete leaves nothing behind. It runs on a
// Redis of its own, so that no other test's keys move the figure.
func TestShardedRedisStoreMemoryFlat(t *testing.T) {
	testenv.Long(t)
	server := testenv.StartRedisServer(t)
	client := server.Client(t)
	ctx := t.Context()
	s := entities.NewShardedRedisStore(client, "mem")
	owner := joinOwner(t, client, "mem", "owner")
	fences := make([]cluster.Fence, cluster.NumShards)
	for shard := range fences {
		fences[shard] = owner.fence(t, shard)
	}
	const workers = 8
	cycle := func(w, n int) error {
		id := fmt.Sprintf("e-%d-%d", w, n)
		f := fences[cluster.ShardOf("counter", id)]
		rev, err := s.SaveFenced(ctx, f, "counter", id, []byte(`{"value":1}`), 0)
		if err != nil {
			return err
		}
		return s.DeleteFenced(ctx, f, "counter", id, rev)
	}
	run := func(total int) {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for n := w; n < total; n += workers {
					if err := cycle(w, n); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run(10_000) // warm up: every shard's counter exists, scripts are cached
	before := usedMemory(t, client)
	start := time.Now()
	run(*memCycles)
	after := usedMemory(t, client)
	t.Logf("%d create/delete cycles in %v: used_memory %d → %d bytes (%+d)",
		*memCycles, time.Since(start).Round(time.Millisecond), before, after, after-before)
	if after-before > 256<<10 {
		t.Fatalf("used_memory grew by %d bytes over %d cycles; a delete leaves something behind", after-before, *memCycles)
	}
	if keys := client.DBSize(ctx).Val(); keys > cluster.NumShards*2+2 {
		t.Fatalf("%d keys after the cycles, want at most the shard records and counters, and the member and its index", keys)
	}
}

// usedMemory is INFO memory's used_memory.
func usedMemory(t *testing.T, client *redis.Client) int64 {
	t.Helper()
	info, err := client.Info(t.Context(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no used_memory in INFO memory: %q", info)
	return 0
}

// newTestShardedStore is a ShardedRedisStore under prefix whose keys are
// deleted when the test ends.
func newTestShardedStore(t testing.TB, client redis.UniversalClient, prefix string) *entities.ShardedRedisStore {
	t.Helper()
	t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
	return entities.NewShardedRedisStore(client, prefix)
}

// owner is a cluster member that takes shards on demand, for the store
// tests: it makes no moves of its own (no rebalancer).
type owner struct {
	m      *cluster.Member
	mu     sync.Mutex
	fences map[int]cluster.Fence
}

// joinOwner joins a member id under prefix with a lease long enough for
// a loaded machine; it leaves when the test ends.
func joinOwner(t testing.TB, client redis.UniversalClient, prefix, id string) *owner {
	t.Helper()
	m, err := cluster.Join(t.Context(), cluster.Config{Client: client, Prefix: prefix, ID: id,
		Addr: "127.0.0.1:1", Lease: cluster.DefaultLease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("join %s: %v", id, err)
	}
	t.Cleanup(func() { _ = m.Leave(context.Background()) })
	testenv.Eventually(t, 5*time.Second, id+"'s lease to be valid", m.Lease().Serving)
	return &owner{m: m, fences: map[int]cluster.Fence{}}
}

// fenceOf acquires shard (once) and returns its fence.
func (o *owner) fenceOf(ctx context.Context, shard int) (cluster.Fence, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f, ok := o.fences[shard]; ok {
		return f, nil
	}
	f, err := o.m.Acquire(ctx, shard)
	if err != nil {
		return cluster.Fence{}, err
	}
	o.fences[shard] = f
	return f, nil
}

// fence is fenceOf, failing the test on error.
func (o *owner) fence(t *testing.T, shard int) cluster.Fence {
	t.Helper()
	f, err := o.fenceOf(t.Context(), shard)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fencedWriter is the Store the conformance suite runs on: a
// ShardedRedisStore whose writes go under the owner's fences.
type fencedWriter struct {
	*entities.ShardedRedisStore
	owner *owner
}

func (w *fencedWriter) Save(ctx context.Context, entityType, id string, data []byte, expected uint64) (uint64, error) {
	f, err := w.owner.fenceOf(ctx, cluster.ShardOf(entityType, id))
	if err != nil {
		return 0, fmt.Errorf("save: %w", err)
	}
	return w.SaveFenced(ctx, f, entityType, id, data, expected)
}

func (w *fencedWriter) Delete(ctx context.Context, entityType, id string, expected uint64) error {
	f, err := w.owner.fenceOf(ctx, cluster.ShardOf(entityType, id))
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return w.DeleteFenced(ctx, f, entityType, id, expected)
}

// saveFencedErr is SaveFenced of counter c-1 for a call expected to fail.
func saveFencedErr(ctx context.Context, s *entities.ShardedRedisStore, f cluster.Fence, data string, expected uint64) error {
	_, err := s.SaveFenced(ctx, f, "counter", "c-1", []byte(data), expected)
	return err
}

func wantFenced(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, entities.ErrFenced) || errors.Is(err, entities.ErrConflict) {
		t.Fatalf("%s: err = %v, want ErrFenced", what, err)
	}
}

func wantNoKey(t *testing.T, ctx context.Context, client redis.UniversalClient, key string) {
	t.Helper()
	if n := client.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("key %s still exists", key)
	}
}
