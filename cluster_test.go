package trellis_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/trellistest"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// startCounters starts n instances of the counter app as one cluster and
// waits until the shards are spread over them.
func startCounters(t *testing.T, n int) []*trellistest.Service {
	t.Helper()
	app := &fixture.CounterApp{}
	instances := trellistest.StartInstances(t, n, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	trellistest.WaitSettled(t, instances...)
	return instances
}

// TestClusterAnyInstanceReachesAnyEntity: increases of a few counters sent
// to three instances at random reach one owner each: every reply is the
// next value, and every instance reads the sum.
func TestClusterAnyInstanceReachesAnyEntity(t *testing.T) {
	instances := startCounters(t, 3)
	const goroutines, perGoroutine = 6, 30
	ids := []string{"c-1", "c-2", "c-3"}
	replies := increaseAll(t, goroutines, perGoroutine, func(g, i int) (*trellistest.Service, string) {
		return instances[(g+i)%len(instances)], ids[g%len(ids)]
	})
	total := 0.0
	for _, ts := range instances {
		total += metricValue(t, ts, "trellis_cluster_shards_served")
	}
	if total != 256 {
		t.Errorf("trellis_cluster_shards_served adds up to %v over the instances, want 256", total)
	}
	for _, id := range ids {
		n := len(replies[id])
		checkSerial(t, id, replies[id], n)
		for i, ts := range instances {
			if c := fixture.Counter(t, ts.Get(t, "/counters/"+id)); c.Value != int64(n) {
				t.Errorf("instance %d reads %s = %d, want %d", i, id, c.Value, n)
			}
		}
	}
}

// TestClusterLinearizable: the linearizability check of increases and
// reads through three instances of a cluster.
func TestClusterLinearizable(t *testing.T) {
	testenv.Long(t)
	instances := startCounters(t, 3)
	h, failed := runCounterClients(t, instances, []string{"hot-a", "hot-b", "hot-c"}, 8, 2*time.Second)
	if len(failed) > 0 {
		t.Errorf("%d operations failed without faults", len(failed))
	}
	lincheck.CheckLinearizable(t, h)
}

// TestClusterRollingRestart: under a steady load of increases and reads
// of hot counters through the instances in the rotation, each of three
// instances in turn is taken out of it, leaves gracefully (handing its
// shards over) and a new one joins: no request fails, and the history is
// linearizable (no increase lost, no stale read).
func TestClusterRollingRestart(t *testing.T) {
	testenv.Long(t)
	app := &fixture.CounterApp{}
	quiet := trellistest.WithLogger(slog.New(slog.DiscardHandler))
	first := trellistest.StartInstances(t, 3, app.Setup, quiet)
	trellistest.WaitSettled(t, first...)
	url, prefix := first[0].Host().Config.RedisURL, first[0].Host().Config.RedisPrefix
	join := func() *trellistest.Service {
		more := trellistest.StartInstances(t, 1, app.Setup, quiet, trellistest.WithRedisURL(url), trellistest.WithStorePrefix(prefix),
			trellistest.WithConfig(func(c *trellis.Config) { c.ClusterSecret = first[0].Host().Config.ClusterSecret }))
		return more[0]
	}

	// The clients play a load balancer: an instance taken out of the
	// rotation gets no new request, and is stopped once the requests it
	// was given have been answered.
	var (
		mu       sync.Mutex
		live     = append([]*trellistest.Service(nil), first...)
		inFlight = map[*trellistest.Service]int{}
		stopped  atomic.Bool
	)
	pick := func(rng *rand.Rand) (*trellistest.Service, func()) {
		mu.Lock()
		defer mu.Unlock()
		ts := live[rng.IntN(len(live))]
		inFlight[ts]++
		return ts, func() {
			mu.Lock()
			inFlight[ts]--
			mu.Unlock()
		}
	}
	drained := func(ts *trellistest.Service) bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight[ts] == 0
	}
	type outcome struct {
		h      *lincheck.History
		failed []error
	}
	load := make(chan outcome, 1)
	go func() {
		h, failed := runCounterLoad(t, []string{"roll-a", "roll-b", "roll-c"}, 6, func() bool { return !stopped.Load() }, pick)
		load <- outcome{h, failed}
	}()
	for i := range first {
		next := join()
		mu.Lock()
		old := live[0]
		live = append(live[1:], next)
		mu.Unlock()
		trellistest.Eventually(t, 30*time.Second, "the old instance's requests are answered", func() bool { return drained(old) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := old.Shutdown(ctx); err != nil {
			t.Errorf("instance %d: shutdown: %v", i, err)
		}
		cancel()
		trellistest.WaitSettled(t, live...)
	}
	stopped.Store(true)
	res := <-load
	t.Logf("rolling restart of 3 instances: %d operations, %d failed", res.h.Len(), len(res.failed))
	if len(res.failed) > 0 {
		t.Errorf("%d operations failed during the rolling restart", len(res.failed))
	}
	lincheck.CheckLinearizable(t, res.h)
}

// metricValue is the value of the series name (without labels) on ts's
// /metrics.
func metricValue(t *testing.T, ts *trellistest.Service, name string) float64 {
	t.Helper()
	v, ok := lookupSeries(t, ts, name)
	if !ok {
		t.Fatalf("no %s on /metrics", name)
	}
	return v
}

// lookupSeries is the value of one series on ts's /metrics, its labels
// included as /metrics writes them, and whether it is there.
func lookupSeries(t *testing.T, ts *trellistest.Service, name string) (float64, bool) {
	t.Helper()
	for line := range strings.Lines(string(ts.Get(t, "/metrics").Body)) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v, true
		}
	}
	return 0, false
}
