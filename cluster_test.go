package trellis_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/fixture"
	"github.com/trellis-go/trellis/trellistest"
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
	instances := startCounters(t, 3)
	h, failed := runCounterClients(t, instances, []string{"hot-a", "hot-b", "hot-c"}, 8, 2*time.Second)
	if failed > 0 {
		t.Errorf("%d operations failed without faults", failed)
	}
	checkLinearizable(t, h)
}

// TestClusterRollingRestart: under a steady load of increases through the
// instances in the rotation, each of three instances in turn is taken out
// of it, leaves gracefully (handing its shards over) and a new one joins:
// no request fails and no increase is lost.
func TestClusterRollingRestart(t *testing.T) {
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

	// The workers play a load balancer: an instance taken out of the
	// rotation gets no new request, and is stopped once the requests it
	// was given have been answered.
	var (
		mu       sync.Mutex
		live     = append([]*trellistest.Service(nil), first...)
		inFlight = map[*trellistest.Service]int{}
		sent     atomic.Int64
		failed   atomic.Int64
		stop     = make(chan struct{})
		workers  sync.WaitGroup
	)
	pick := func(i int) (*trellistest.Service, func()) {
		mu.Lock()
		defer mu.Unlock()
		ts := live[i%len(live)]
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
	for w := range 4 {
		workers.Go(func() {
			for i := w; ; i += 4 {
				select {
				case <-stop:
					return
				default:
				}
				ts, done := pick(i)
				resp, err := ts.Call(context.Background(), http.MethodPost, "/counters/rolling/increase", map[string]int{"by": 1})
				done()
				sent.Add(1)
				if err != nil || resp.Status != http.StatusOK {
					failed.Add(1)
					if err == nil {
						t.Logf("increase: status %d: %s", resp.Status, resp.Body)
					} else {
						t.Logf("increase: %v", err)
					}
				}
			}
		})
	}
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
	close(stop)
	workers.Wait()
	if c := fixture.Counter(t, live[0].Get(t, "/counters/rolling")); c.Value != sent.Load()-failed.Load() || failed.Load() != 0 {
		t.Errorf("%d increases sent, %d failed, the counter reads %d", sent.Load(), failed.Load(), c.Value)
	}
	t.Logf("rolling restart of 3 instances: %d increases, %d failed", sent.Load(), failed.Load())
}
