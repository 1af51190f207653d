package timers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }

// storeKind names a Store implementation under test.
type storeKind string

const (
	memoryKind  storeKind = "memory"
	redisKind   storeKind = "redis"
	clusterKind storeKind = "cluster"
)

// storeKinds are what the conformance suite runs on: the Redis store runs
// it on one Redis and on a Redis Cluster (3 masters), where its partitions
// are spread over the masters.
var storeKinds = []storeKind{memoryKind, redisKind, clusterKind}

// epoch is where fake clocks start: a whole second, so due times are exact.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// newStore returns an empty store of kind on clk (nil: the real clock, and
// Redis TIME for Redis). Redis stores get a prefix of their own, deleted
// when the test ends.
func newStore(t testing.TB, kind storeKind, clk clockwork.Clock) Store {
	t.Helper()
	switch kind {
	case memoryKind:
		return NewMemoryStore(clk)
	case redisKind:
		return newRedisStoreOn(t, testenv.Redis(t), newTestPrefix(), clk)
	case clusterKind:
		return newRedisStoreOn(t, testenv.RedisCluster(t), newTestPrefix(), clk)
	}
	t.Fatalf("unknown store kind %q", kind)
	return nil
}

// newRedisStoreOn returns a RedisStore on client under prefix and deletes
// the prefix's keys when the test ends.
func newRedisStoreOn(t testing.TB, client redis.UniversalClient, prefix string, clk clockwork.Clock) *RedisStore {
	t.Helper()
	// Registered after the client's own cleanup, so it runs first.
	t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
	var opts []RedisOption
	if clk != nil {
		opts = append(opts, WithRedisClock(clk))
	}
	return NewRedisStore(client, prefix, opts...)
}

// newTestPrefix returns a key prefix no other test uses (base32: nothing
// special in a SCAN pattern).
func newTestPrefix() string { return "test-timers-" + rand.Text() }

// quietLogger drops logs; tests that check logs make their own.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startScheduler makes and starts a scheduler and shuts it down when the
// test ends.
func startScheduler(t testing.TB, store Store, d Dispatcher, cfg Config) *Scheduler {
	t.Helper()
	s := newScheduler(t, store, d, cfg)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

func newScheduler(t testing.TB, store Store, d Dispatcher, cfg Config) *Scheduler {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := New(store, d, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// waitFor polls cond every millisecond for up to 20 s: bounded, and
// never a bare sleep standing in for a condition.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 20*time.Second, what, cond)
}

// waitWithin is waitFor with a bound of limit.
func waitWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// quiesce makes the loop go round once more and waits until it sleeps
// with every call it started finished and recorded: after it, everything
// due by the clock's now has run (or is running, if a dispatcher blocks).
func quiesce(t testing.TB, s *Scheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Settle(ctx); err != nil {
		t.Fatalf("the loop did not go round and settle: %v", err)
	}
}

// advanceTo moves a fake clock to at and lets the loop catch up.
func advanceTo(t testing.TB, clk *clockwork.FakeClock, s *Scheduler, at time.Time) {
	t.Helper()
	if d := at.Sub(clk.Now()); d > 0 {
		clk.Advance(d)
	}
	quiesce(t, s)
}

// recorded is one call a recorder saw.
type recorded struct {
	firing Firing
	at     time.Time // the recorder's clock when the call started
	call   components.DeferredCall
}

// recorder is a Dispatcher that records calls and answers with handle
// (success when nil).
type recorder struct {
	clk    clockwork.Clock
	handle func(ctx context.Context, call components.DeferredCall) error

	mu    sync.Mutex
	calls []recorded
	count map[string]int
}

func newRecorder(clk clockwork.Clock) *recorder {
	if clk == nil {
		clk = clockwork.NewRealClock()
	}
	return &recorder{clk: clk, count: make(map[string]int)}
}

func (r *recorder) Dispatch(ctx context.Context, call components.DeferredCall) (json.RawMessage, error) {
	f, _ := FiringFromContext(ctx)
	r.mu.Lock()
	r.calls = append(r.calls, recorded{firing: f, at: r.clk.Now(), call: call})
	r.count[f.Name]++
	r.mu.Unlock()
	if r.handle != nil {
		return nil, r.handle(ctx, call)
	}
	return json.RawMessage(`{}`), nil
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.calls...)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.count)
}

// testCall is a deferred call with a JSON argument.
func testCall(arg string) components.DeferredCall {
	return components.DeferredCall{ComponentID: "test-action", Method: "run", Argument: json.RawMessage(arg)}
}

// jsonString returns a JSON string value exactly n bytes long (n ≥ 2).
func jsonString(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }

// base64String returns a JSON string value of about n bytes of base64
// text, which is stored with the shared Huffman table.
func base64String(n int) string {
	raw := make([]byte, n*3/4)
	for i := range raw {
		raw[i] = byte(i*7919 + i*i*31)
	}
	return `"` + base64.StdEncoding.EncodeToString(raw) + `"`
}

func mustCreate(t testing.TB, s *Scheduler, name string, delay time.Duration, call components.DeferredCall, opts ...CreateOption) Timer {
	t.Helper()
	tm, err := s.Create(t.Context(), name, delay, call, opts...)
	if err != nil {
		t.Fatalf("Create(%q, %v): %v", name, delay, err)
	}
	return tm
}
