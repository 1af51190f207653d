package timers

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// Tests that only a Redis store can take: real Redis TIME, separate
// clients as separate instances, restarts, wipes, the full 50,000 limit.
// Most run on one Redis and on the cluster (redisTargets).

// redisTargets are the Redis store kinds: one Redis, and a cluster.
var redisTargets = []storeKind{redisKind, clusterKind}

// connect returns a new client of kind (a Redis store kind), as a second
// instance would have.
func connect(t testing.TB, kind storeKind) redis.UniversalClient {
	if kind == clusterKind {
		return testenv.RedisCluster(t)
	}
	return testenv.Redis(t)
}

// TestRedisNeverEarlyRealTime: with Redis TIME as the clock, no call
// starts before creation time + delay, nor before its firing's DueAt; the
// loop finds every timer without the IdleCheck safety net (set to a day),
// so it plans its sleeps from due times, not by polling.
func TestRedisNeverEarlyRealTime(t *testing.T) {
	for _, kind := range redisTargets {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			testNeverEarlyRealTime(t, kind)
		})
	}
}

func testNeverEarlyRealTime(t *testing.T, kind storeKind) {
	rec := newRecorder(nil)
	s := startScheduler(t, newStore(t, kind, nil), rec, Config{IdleCheck: 24 * time.Hour})
	const n = 300
	earliest := make(map[string]time.Time, n)
	for i := range n {
		name := fmt.Sprintf("t-%03d", i)
		delay := time.Duration(20+(i*7)%600) * time.Millisecond
		earliest[name] = time.Now().Add(delay)
		mustCreate(t, s, name, delay, testCall(`1`))
	}
	waitFor(t, "every timer to run", func() bool { return rec.distinct() == n })
	for _, c := range rec.all() {
		if c.at.Before(earliest[c.firing.Name]) || c.at.Before(c.firing.DueAt) {
			t.Errorf("%s ran early: at %v, created+delay %v, due %v", c.firing.Name,
				c.at.Format(time.StampMicro), earliest[c.firing.Name].Format(time.StampMicro), c.firing.DueAt.Format(time.StampMicro))
		}
	}
}

// TestRedisTwoInstances10000: two schedulers with their own clients on one
// Redis, and on a cluster, run every one of 10,000 timers, and in normal
// operation each exactly once.
func TestRedisTwoInstances10000(t *testing.T) {
	testenv.Long(t)
	for _, kind := range redisTargets {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			testTwoInstances10000(t, kind)
		})
	}
}

func testTwoInstances10000(t *testing.T, kind storeKind) {
	prefix := newTestPrefix()
	recs := []*recorder{newRecorder(nil), newRecorder(nil)}
	var instances []*Scheduler
	for _, rec := range recs {
		store := newRedisStoreOn(t, connect(t, kind), prefix, nil)
		instances = append(instances, startScheduler(t, store, rec, Config{}))
	}
	const n = 10_000
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				mustCreate(t, instances[i%2], fmt.Sprintf("t-%05d", i), time.Duration(100+i%1000)*time.Millisecond, testCall(`1`))
			}
		})
	}
	wg.Wait()
	total := func() int { return recs[0].len() + recs[1].len() }
	waitFor(t, "10,000 calls", func() bool { return total() >= n })
	waitFor(t, "the store to empty", func() bool {
		st, err := instances[0].Stats(t.Context())
		return err == nil && st.Active == 0
	})
	seen := make(map[string]int, n)
	for _, rec := range recs {
		for _, c := range rec.all() {
			seen[c.firing.Name]++
		}
	}
	for name, k := range seen {
		if k != 1 {
			t.Errorf("%s ran %d times", name, k)
		}
	}
	if len(seen) != n || total() != n {
		t.Errorf("%d timers ran, %d calls; want %d and %d", len(seen), total(), n, n)
	}
	t.Logf("calls per instance: %d, %d", recs[0].len(), recs[1].len())
}

// TestRedisDeadInstanceRealTime: a timer claimed by an instance that then
// never reports runs on another instance once the lease (1 s) expires on
// Redis's clock, not before.
func TestRedisDeadInstanceRealTime(t *testing.T) {
	for _, kind := range redisTargets {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			testDeadInstanceRealTime(t, kind)
		})
	}
}

func testDeadInstanceRealTime(t *testing.T, kind storeKind) {
	store := newStore(t, kind, nil)
	rec := newRecorder(nil)
	creator := newScheduler(t, store, rec, Config{})
	mustCreate(t, creator, "a", 0, testCall(`1`))
	// The dead instance claims it (due in the next millisecond at most,
	// since due times round up) and never reports.
	var claimedAt time.Time
	waitFor(t, "the dead instance's claim", func() bool {
		claimedAt = time.Now()
		dead, err := store.claim(t.Context(), 10, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return len(dead.timers) == 1
	})
	startScheduler(t, store, rec, Config{Lease: time.Second, CallTimeout: 500 * time.Millisecond})
	waitFor(t, "the re-run", func() bool { return rec.len() == 1 })
	c := rec.all()[0]
	if waited := c.at.Sub(claimedAt); waited < time.Second-time.Millisecond || waited > 3*time.Second || c.firing.Attempt != 2 {
		t.Errorf("re-run %+v after %v; want attempt 2 after the 1 s lease", c.firing, waited)
	}
}

// TestRedisActiveLimit50000: the real limit at its edge, on one Redis and
// on a cluster, where the 50,000 are spread over the 16 partitions and the
// masters: the store filled to 49,999 (pipelined, under no limit), one
// create is accepted and the next refused with a *LimitError; replacing a
// timer at the limit is accepted; a delete makes room for exactly one.
func TestRedisActiveLimit50000(t *testing.T) {
	testenv.Long(t)
	for _, kind := range redisTargets {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			client := connect(t, kind)
			store := newRedisStoreOn(t, client, newTestPrefix(), nil)
			s := newScheduler(t, store, newRecorder(nil), Config{})
			fillTimers(t, client, store, DefaultMaxActive-1)
			perPartition := make([]int64, len(store.parts))
			for i, p := range store.parts {
				perPartition[i] = client.HLen(t.Context(), p.keys[1]).Val()
			}
			t.Logf("timers per partition: %v", perPartition)

			mustCreate(t, s, "the-last", time.Hour, testCall(`1`))
			_, err := s.Create(t.Context(), "one-too-many", time.Hour, testCall(`1`))
			wantLimit(t, err, LimitError{Limit: LimitActive, Value: DefaultMaxActive, Max: DefaultMaxActive})
			mustCreate(t, s, "t-123", time.Hour, testCall(`2`)) // a replace
			wantStats(t, s, Stats{Active: DefaultMaxActive, Limit: DefaultMaxActive})
			if err := s.Delete(t.Context(), "t-7"); err != nil {
				t.Fatal(err)
			}
			mustCreate(t, s, "in-the-room-made", time.Hour, testCall(`1`))
			_, err = s.Create(t.Context(), "one-too-many", time.Hour, testCall(`1`))
			wantLimit(t, err, LimitError{Limit: LimitActive, Value: DefaultMaxActive, Max: DefaultMaxActive})
		})
	}
}

// TestRedisActiveLimitConcurrentOvershoot pins how exact the limit is when
// creates race across partitions: on one Redis, where the create script
// counts every partition, the store ends with exactly MaxActive timers; on
// a cluster, with k creates of new names in flight at once, with at most
// MaxActive+k-1, and never fewer than MaxActive (no create is refused
// while there is room it could see).
func TestRedisActiveLimitConcurrentOvershoot(t *testing.T) {
	for _, kind := range redisTargets {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			const limit, k = 200, 16
			client := connect(t, kind)
			store := newRedisStoreOn(t, client, newTestPrefix(), nil)
			s := newScheduler(t, store, newRecorder(nil), Config{MaxActive: limit})
			fillTimers(t, client, store, limit-5)
			var wg sync.WaitGroup
			for w := range k {
				wg.Go(func() {
					for i := 0; ; i++ {
						_, err := s.Create(t.Context(), fmt.Sprintf("w%d-%d", w, i), time.Hour, testCall(`1`))
						if errors.Is(err, ErrLimitExceeded) {
							return
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			st, err := s.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			most := limit + k - 1
			if kind == redisKind {
				most = limit
			}
			if st.Active < limit || st.Active > most {
				t.Errorf("%d timers after %d racing creators; want %d to %d", st.Active, k, limit, most)
			}
			t.Logf("%d timers after %d racing creators, limit %d", st.Active, k, limit)
		})
	}
}

// fillTimers stores n timers t-0 … t-(n-1), due in an hour, through the
// create script on their partitions, pipelined and with no limit.
func fillTimers(t *testing.T, client redis.UniversalClient, store *RedisStore, n int) {
	t.Helper()
	ctx := t.Context()
	call, _ := testCall(`1`).Marshal()
	const batch = 5000
	for start := 0; start < n; start += batch {
		var calls []scriptCall
		for i := start; i < min(start+batch, n); i++ {
			name := "t-" + strconv.Itoa(i)
			p := store.part(name)
			calls = append(calls, scriptCall{keys: append(slices.Clip(p.keys), p.gen),
				args: []any{"", 3_600_000, n + 1, 0, name, call, store.channel, 0, partitionOf(name)}})
		}
		cmds, err := evalEach(ctx, client, createTimerWithLimit, calls)
		if err != nil {
			t.Fatalf("pipelined creates: %v", err)
		}
		for _, c := range cmds {
			if res, _ := c.Slice(); len(res) == 0 || res[0] != "ok" {
				t.Fatalf("pipelined create: %v", res)
			}
		}
	}
}

// TestRedisRestartWithAOF: Redis (appendonly, fsync always) is shut down
// and restarted on the same port and dir while timers are running:
// every timer still runs, the store ends empty, and the restart is not
// mistaken for a wipe.
func TestRedisRestartWithAOF(t *testing.T) {
	testenv.Long(t)
	t.Parallel()
	srv := testenv.StartRedisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	store := newRedisStoreOn(t, srv.Client(t), newTestPrefix(), nil)
	rec := newRecorder(nil)
	s := startScheduler(t, store, rec, Config{Lease: 2 * time.Second, CallTimeout: time.Second, IdleCheck: 100 * time.Millisecond})
	const n = 1000
	for i := range n {
		mustCreate(t, s, fmt.Sprintf("t-%04d", i), time.Duration(i*3)*time.Millisecond, testCall(`1`))
	}
	waitFor(t, "a third of the timers to run", func() bool { return rec.distinct() >= n/3 })
	srv.Restart()
	waitFor(t, "every timer to run after the restart", func() bool { return rec.distinct() == n })
	waitFor(t, "the store to empty", func() bool {
		st, err := s.Stats(t.Context())
		return err == nil && st.Active == 0
	})
	if err := s.Ready(t.Context()); err != nil {
		t.Errorf("Ready after a restart with AOF = %v, want nil\nredis log:\n%s", err, srv.Log())
	}
	t.Logf("%d calls for %d timers (a re-run is allowed for calls whose outcome the restart cut off)", rec.len(), n)
}

// TestRedisWipeDetected: FLUSHALL while a scheduler runs is noticed by
// its loop within IdleCheck and reported by Ready (a *WipedError) and the
// store_wiped metric until acknowledged; timers created after the wipe
// still run.
func TestRedisWipeDetected(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	client := srv.Client(t)
	store := newRedisStoreOn(t, client, newTestPrefix(), nil)
	rec := newRecorder(nil)
	s := startScheduler(t, store, rec, Config{IdleCheck: 20 * time.Millisecond})
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("Ready before the wipe: %v", err)
	}
	mustCreate(t, s, "lost", time.Hour, testCall(`1`))
	if err := client.FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	var we *WipedError
	waitFor(t, "Ready to report the wipe", func() bool { return errors.As(s.Ready(t.Context()), &we) })
	if !errors.Is(s.Ready(t.Context()), ErrStoreWiped) || strings.Count(we.Marker, ":marker") != redisPartitions ||
		!strings.Contains(we.Error(), store.parts[0].marker) || !strings.Contains(we.Error(), "lost") {
		t.Errorf("Ready = %v", s.Ready(t.Context()))
	}
	if v := testutil.ToFloat64(s.metrics.wiped); v != 1 {
		t.Errorf("store_wiped = %v, want 1", v)
	}
	mustCreate(t, s, "after", 0, testCall(`1`))
	waitFor(t, "a timer created after the wipe to run", func() bool { return rec.len() == 1 })
	if err := s.AcknowledgeWipe(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(t.Context()); err != nil || testutil.ToFloat64(s.metrics.wiped) != 0 {
		t.Errorf("after AcknowledgeWipe: Ready = %v, store_wiped = %v", err, testutil.ToFloat64(s.metrics.wiped))
	}
}

// TestRedisPartitionWipeDetected: on a cluster, one partition losing its
// keys (what a master restarted empty, with no replica to take over, does
// to the partitions it held) is noticed and named, while the timers of
// the other partitions keep running.
func TestRedisPartitionWipeDetected(t *testing.T) {
	t.Parallel()
	client := testenv.RedisCluster(t)
	store := newRedisStoreOn(t, client, newTestPrefix(), nil)
	rec := newRecorder(nil)
	s := startScheduler(t, store, rec, Config{IdleCheck: 20 * time.Millisecond})
	lost := "lost"
	mustCreate(t, s, lost, time.Hour, testCall(`1`))
	p := store.part(lost)
	// The partition's keys only: other tests share the cluster.
	if err := client.Del(t.Context(), append([]string{p.marker, p.gen}, p.keys...)...).Err(); err != nil {
		t.Fatal(err)
	}
	var we *WipedError
	waitFor(t, "Ready to report the wipe", func() bool { return errors.As(s.Ready(t.Context()), &we) })
	if we.Marker != p.marker {
		t.Errorf("WipedError.Marker = %q, want only the wiped partition's %q", we.Marker, p.marker)
	}
	// A timer in another partition still runs.
	other := "kept-0"
	for i := 1; partitionOf(other) == partitionOf(lost); i++ {
		other = "kept-" + strconv.Itoa(i)
	}
	mustCreate(t, s, other, 0, testCall(`1`))
	waitFor(t, "a timer of another partition to run", func() bool { return rec.len() == 1 })
}

// TestRedisPartitionsSpreadOverMasters: the 16 partitions' keys are in 16
// different slots, spread over the cluster's 3 masters 5, 5 and 6, and a
// partition's keys share its slot.
func TestRedisPartitionsSpreadOverMasters(t *testing.T) {
	t.Parallel()
	client := testenv.RedisCluster(t)
	store := newRedisStoreOn(t, client, newTestPrefix(), nil)
	ctx := t.Context()
	slots := map[int64]bool{}
	for _, p := range store.parts {
		var slot int64 = -1
		for _, k := range append([]string{p.gen, p.marker}, p.keys...) {
			got := client.ClusterKeySlot(ctx, k).Val()
			if slot >= 0 && got != slot {
				t.Fatalf("partition keys %v are in different slots", p.keys)
			}
			slot = got
		}
		slots[slot] = true
	}
	if len(slots) != redisPartitions {
		t.Fatalf("%d partitions in %d slots", redisPartitions, len(slots))
	}
	startScheduler(t, store, newRecorder(nil), Config{}) // writes the markers
	shares := testenv.KeysPerMaster(t, client, store.keys.Prefix()+":timers:*:marker")
	var counts []int
	for _, n := range shares {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	if !slices.Equal(counts, []int{5, 5, 6}) {
		t.Errorf("partitions per master = %v, want 5, 5 and 6", shares)
	}
}

// TestRedisKeyLayout pins the key layout and record format documented on
// RedisStore, which operators and migrations rely on: the 16 partition
// tags, the partition of a name (CRC-32 IEEE of the name, modulo 16), and
// the keys of a partition.
func TestRedisKeyLayout(t *testing.T) {
	t.Parallel()
	wantTags := []string{"t.0.22", "t.1.21", "t.2.3", "t.3.0", "t.4.41", "t.5.42", "t.6.61", "t.7.62",
		"t.8.11", "t.9.12", "t.10.2", "t.11.1", "t.12.62", "t.13.61", "t.14.20", "t.15.23"}
	if !slices.Equal(partitionTags, wantTags) {
		t.Fatalf("partition tags = %q, want %q", partitionTags, wantTags)
	}
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	store := newRedisStoreOn(t, client, prefix, nil)
	s := startScheduler(t, store, newRecorder(nil), Config{})
	tm := mustCreate(t, s, "a:b", time.Hour, testCall(`{"x":1}`), WithMaxRetries(2))
	ctx := context.Background()
	base := prefix + ":timers:{" + wantTags[crc32.ChecksumIEEE([]byte("a:b"))%16] + "}:"
	rec, err := client.HGet(ctx, base+"data", "a:b").Result()
	wantRec := fmt.Sprintf(`%d:%d:2:%d:0:0:0:{"componentId":"test-action","method":"run","argument":{"x":1}}`,
		tm.Generation, tm.CreatedAt.UnixMilli(), tm.DueAt.UnixMilli())
	if err != nil || rec != wantRec {
		t.Errorf("record = %q, %v\nwant %q", rec, err, wantRec)
	}
	if score, err := client.ZScore(ctx, base+"due", "a:b").Result(); err != nil || int64(score) != tm.DueAt.UnixMilli() {
		t.Errorf("due score = %v, %v", score, err)
	}
	if gen, err := client.Get(ctx, base+"generation").Uint64(); err != nil || gen != tm.Generation {
		t.Errorf("generation = %v, %v", gen, err)
	}
	for _, tag := range wantTags {
		if n, err := client.Exists(ctx, prefix+":timers:{"+tag+"}:marker").Result(); err != nil || n != 1 {
			t.Errorf("marker of %s exists = %v, %v", tag, n, err)
		}
	}
}

// TestRedisCorruptCallFails: a timer whose stored call does not decode
// fails like a call that ran and failed (retried later, its error on the
// timer) and costs the other timers of its partition nothing.
func TestRedisCorruptCallFails(t *testing.T) {
	t.Parallel()
	client := connect(t, redisKind)
	clk := clockwork.NewFakeClock()
	store := newRedisStoreOn(t, client, newTestPrefix(), clk)
	rec := newRecorder(clk)
	s := startScheduler(t, store, rec, Config{})
	good := "good"
	for i := 0; partitionOf(good) != partitionOf("bad"); i++ {
		good = "good-" + strconv.Itoa(i)
	}
	mustCreate(t, s, "bad", time.Second, testCall(`1`))
	due := mustCreate(t, s, good, time.Second, testCall(`2`)).DueAt
	data := store.part("bad").keys[1]
	stored, err := client.HGet(t.Context(), data, "bad").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Keep the header, make the call a DEFLATE stream that is not one.
	_, call, err := decodeRecordHeader("bad", stored)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(t.Context(), data, "bad", stored[:len(stored)-len(call)]+"\x00not deflate").Err(); err != nil {
		t.Fatal(err)
	}
	advanceTo(t, clk, s, due)
	if got := rec.all(); len(got) != 1 || got[0].firing.Name != good {
		t.Fatalf("calls %+v, want only %s's", got, good)
	}
	// Get cannot decode it either; the header says what happened.
	stored, err = client.HGet(t.Context(), data, "bad").Result()
	if err != nil {
		t.Fatal(err)
	}
	bad, _, err := decodeRecordHeader("bad", stored)
	if err == nil {
		err = applyState(&bad, client.HGet(t.Context(), store.part("bad").keys[3], "bad").Val())
	}
	if err != nil || bad.Attempts != 1 || !strings.Contains(bad.LastError, "decode the stored call") {
		t.Errorf("the corrupt timer after its attempt: %+v, %v", bad, err)
	}
}

// TestRedisRecordsOfEarlierVersions: a record in the legacy form
// (attempts, last attempt and error in its header, no state) runs as its
// next attempt, and Get reads it as it was until then.
func TestRedisRecordsOfEarlierVersions(t *testing.T) {
	client := connect(t, redisKind)
	clk := clockwork.NewFakeClock()
	store := newRedisStoreOn(t, client, newTestPrefix(), clk)
	rec := newRecorder(clk)
	s := startScheduler(t, store, rec, Config{})
	created := mustCreate(t, s, "old", time.Second, testCall(`1`))
	data := store.part("old").keys[1]
	stored := client.HGet(t.Context(), data, "old").Val()
	_, call, err := decodeRecordHeader("old", stored)
	if err != nil {
		t.Fatal(err)
	}
	// Two failed attempts, the last one a second before it is due.
	last := created.DueAt.Add(-time.Second)
	header := fmt.Sprintf("%d:%d:0:%d:2:%d:4:boom", created.Generation, created.CreatedAt.UnixMilli(), created.DueAt.UnixMilli(), last.UnixMilli())
	if err := client.HSet(t.Context(), data, "old", header+call).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.HDel(t.Context(), store.part("old").keys[3], "old").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), "old")
	if err != nil || got.Attempts != 2 || got.LastError != "boom" || !got.LastAttemptAt.Equal(last) {
		t.Fatalf("Get = %+v, %v; want 2 attempts, the last at %v with error boom", got, err, last)
	}
	advanceTo(t, clk, s, created.DueAt)
	if calls := rec.all(); len(calls) != 1 || calls[0].firing.Attempt != 3 || calls[0].firing.Generation != created.Generation {
		t.Fatalf("calls %+v, want attempt 3 of generation %d", calls, created.Generation)
	}
	waitFor(t, "the timer to be removed", func() bool {
		_, err := s.Get(t.Context(), "old")
		return errors.Is(err, ErrNotFound)
	})
}

// TestRedisBurstClaimsFromFewPartitions: with every partition holding more
// due timers than a claim's share, a claim of 128 takes them from two
// partitions (a script call per 64 timers, not one per partition), and
// claims go on until every due timer is claimed exactly once.
func TestRedisBurstClaimsFromFewPartitions(t *testing.T) {
	for _, kind := range redisTargets {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			clk := clockwork.NewFakeClock()
			store := newRedisStoreOn(t, connect(t, kind), newTestPrefix(), clk)
			s := newScheduler(t, store, newRecorder(clk), Config{})
			perPartition := make([]int, redisPartitions)
			n := 0
			for i := 0; slices.Min(perPartition) < claimShare+10; i++ {
				name := "t-" + strconv.Itoa(i)
				mustCreate(t, s, name, 0, testCall(`1`))
				perPartition[partitionOf(name)]++
				n++
			}
			clk.Advance(time.Millisecond)

			b, err := store.claim(t.Context(), 2*claimShare, time.Minute)
			if err != nil || len(b.timers) != 2*claimShare {
				t.Fatalf("first claim: %d timers, %v; want %d", len(b.timers), err, 2*claimShare)
			}
			from := map[int]int{}
			for _, tm := range b.timers {
				from[partitionOf(tm.Name)]++
			}
			if len(from) != 2 {
				t.Errorf("first claim took timers from partitions %v, want two", from)
			}
			seen := map[string]bool{}
			for claims := 0; ; claims++ {
				for _, tm := range b.timers {
					if seen[tm.Name] {
						t.Fatalf("%s claimed twice", tm.Name)
					}
					seen[tm.Name] = true
				}
				if len(seen) == n {
					break
				}
				if claims > 2*n/claimShare+redisPartitions {
					t.Fatalf("%d claims took %d of %d timers", claims, len(seen), n)
				}
				if b, err = store.claim(t.Context(), 2*claimShare, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
