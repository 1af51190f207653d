package timers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trellis-go/trellis/internal/testenv"
)

// Tests that only a Redis store can take: real Redis TIME, separate
// clients as separate instances, restarts, wipes, the full 50,000 limit.

// TestRedisNeverEarlyRealTime: with Redis TIME as the clock, no call
// starts before creation time + delay, nor before its firing's DueAt; the
// loop finds every timer without the IdleCheck safety net (set to a day),
// so it plans its sleeps from due times, not by polling.
func TestRedisNeverEarlyRealTime(t *testing.T) {
	t.Parallel()
	rec := newRecorder(nil)
	s := startScheduler(t, newStore(t, redisKind, nil), rec, Config{IdleCheck: 24 * time.Hour})
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
// Redis run every one of 10,000 timers, and in normal operation each
// exactly once.
func TestRedisTwoInstances10000(t *testing.T) {
	t.Parallel()
	prefix := newTestPrefix()
	recs := []*recorder{newRecorder(nil), newRecorder(nil)}
	var instances []*Scheduler
	for _, rec := range recs {
		store := newRedisStoreOn(t, testenv.Redis(t), prefix, nil)
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
	t.Parallel()
	store := newStore(t, redisKind, nil)
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

// TestRedisActiveLimit50000: the real limit: 50,000 timers (created
// through the create script, pipelined) are accepted, the next is refused
// with a *LimitError, and replacing one of them is not.
func TestRedisActiveLimit50000(t *testing.T) {
	t.Parallel()
	client := testenv.Redis(t)
	store := newRedisStoreOn(t, client, newTestPrefix(), nil)
	s := newScheduler(t, store, newRecorder(nil), Config{})
	ctx := t.Context()
	if err := createTimerWithLimit.Load(ctx, client).Err(); err != nil {
		t.Fatal(err)
	}
	call, _ := testCall(`1`).Marshal()
	keys := []string{store.keys[0], store.keys[1], store.keys[2], store.gen}
	for start := 0; start < DefaultMaxActive; start += 5000 {
		pipe := client.Pipeline()
		for i := start; i < start+5000; i++ {
			createTimerWithLimit.EvalSha(ctx, pipe, keys, "", 3_600_000, DefaultMaxActive, 0, "t-"+strconv.Itoa(i), call, store.channel)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			t.Fatalf("pipelined creates: %v", err)
		}
		for _, c := range cmds {
			if res, _ := c.(interface{ Slice() ([]any, error) }).Slice(); len(res) == 0 || res[0] != "ok" {
				t.Fatalf("pipelined create: %v", res)
			}
		}
	}
	_, err := s.Create(ctx, "one-too-many", time.Hour, testCall(`1`))
	wantLimit(t, err, LimitError{Limit: LimitActive, Value: DefaultMaxActive, Max: DefaultMaxActive})
	mustCreate(t, s, "t-123", time.Hour, testCall(`2`))
	wantStats(t, s, Stats{Active: DefaultMaxActive, Limit: DefaultMaxActive})
}

// TestRedisRestartWithAOF: Redis (appendonly, fsync always) is shut down
// and restarted on the same port and dir while timers are running:
// every timer still runs, the store ends empty, and the restart is not
// mistaken for a wipe.
func TestRedisRestartWithAOF(t *testing.T) {
	t.Parallel()
	srv := startRedisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	store := newRedisStoreOn(t, srv.client(t), newTestPrefix(), nil)
	rec := newRecorder(nil)
	s := startScheduler(t, store, rec, Config{Lease: 2 * time.Second, CallTimeout: time.Second, IdleCheck: 100 * time.Millisecond})
	const n = 1000
	for i := range n {
		mustCreate(t, s, fmt.Sprintf("t-%04d", i), time.Duration(i*3)*time.Millisecond, testCall(`1`))
	}
	waitFor(t, "a third of the timers to run", func() bool { return rec.distinct() >= n/3 })
	srv.restart()
	waitFor(t, "every timer to run after the restart", func() bool { return rec.distinct() == n })
	waitFor(t, "the store to empty", func() bool {
		st, err := s.Stats(t.Context())
		return err == nil && st.Active == 0
	})
	if err := s.Ready(t.Context()); err != nil {
		t.Errorf("Ready after a restart with AOF = %v, want nil\nredis log:\n%s", err, srv.log())
	}
	t.Logf("%d calls for %d timers (a re-run is allowed for calls whose outcome the restart cut off)", rec.len(), n)
}

// TestRedisWipeDetected: FLUSHALL while a scheduler runs is noticed by
// its loop within IdleCheck and reported by Ready (a *WipedError) and the
// store_wiped metric until acknowledged; timers created after the wipe
// still run.
func TestRedisWipeDetected(t *testing.T) {
	t.Parallel()
	srv := startRedisServer(t)
	client := srv.client(t)
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
	if !errors.Is(s.Ready(t.Context()), ErrStoreWiped) || we.Marker != store.marker || !strings.Contains(we.Error(), "lost") {
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

// TestRedisKeyLayout pins the key layout and record format documented on
// RedisStore, which operators and migrations rely on.
func TestRedisKeyLayout(t *testing.T) {
	t.Parallel()
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	store := newRedisStoreOn(t, client, prefix, nil)
	s := startScheduler(t, store, newRecorder(nil), Config{})
	tm := mustCreate(t, s, "a:b", time.Hour, testCall(`{"x":1}`), WithMaxRetries(2))
	ctx := context.Background()
	rec, err := client.HGet(ctx, prefix+":timers:data", "a:b").Result()
	wantRec := fmt.Sprintf(`%d:%d:2:%d:0:0:0:{"componentId":"test-action","method":"run","argument":{"x":1}}`,
		tm.Generation, tm.CreatedAt.UnixMilli(), tm.DueAt.UnixMilli())
	if err != nil || rec != wantRec {
		t.Errorf("record = %q, %v\nwant %q", rec, err, wantRec)
	}
	if score, err := client.ZScore(ctx, prefix+":timers:due", "a:b").Result(); err != nil || int64(score) != tm.DueAt.UnixMilli() {
		t.Errorf("due score = %v, %v", score, err)
	}
	if gen, err := client.Get(ctx, prefix+":timers:generation").Uint64(); err != nil || gen != tm.Generation {
		t.Errorf("generation = %v, %v", gen, err)
	}
	if n, err := client.Exists(ctx, prefix+":timers:marker").Result(); err != nil || n != 1 {
		t.Errorf("marker exists = %v, %v", n, err)
	}
}
