package trellis_test

import (
	"flag"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// flagStoreCut is how long TestClusterOwnerCutFromRedisLinearizable cuts
// the owner off from Redis (a few leases by default; longer runs with a
// larger value, say -cluster.storecut=10s -count=5).
var flagStoreCut = flag.Duration("cluster.storecut", 2*storeCutLease,
	"how long TestClusterOwnerCutFromRedisLinearizable cuts the owner off from Redis")

// storeCutLease is the lease of the tests below: shorter than the request
// timeout, as every lease that lets a command outlive it is.
const storeCutLease = 3 * time.Second

// TestClusterOwnerCutFromRedisLinearizable: three instances, one of which
// (the owner of a hot counter) reaches Redis through a proxy; clients
// increase and read the counter only through the other two, so that every
// command is forwarded to the owner. The owner is cut off from Redis (its
// connections blackholed, new ones refused) for longer than the lease:
// writes in flight are applied and their answers lost, the owner stops
// serving, the others take the shard. No command may take effect twice:
// the history is linearizable, and every failure is 503 or 504.
func TestClusterOwnerCutFromRedisLinearizable(t *testing.T) {
	testenv.Long(t)
	url := trellistest.RedisURL(t)
	app := &fixture.CounterApp{}
	opts := []trellistest.Option{trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = storeCutLease; c.RequestTimeout = 20 * time.Second })}
	insts := trellistest.StartInstances(t, 2, app.Setup, append(opts, trellistest.WithRedisURL(url))...)
	addr := strings.TrimPrefix(url, "redis://")
	addr, _, _ = strings.Cut(addr, "/")
	proxy := peertest.NewProxy(t, addr)
	owner := trellistest.JoinInstance(t, insts[0], app.Setup,
		append(opts, trellistest.WithRedisURL(strings.Replace(url, addr, proxy.Addr(), 1)))...)
	insts = append(insts, owner)
	trellistest.WaitSettled(t, insts...)
	keys := keysOwnedBy(t, owners(t, insts), []int{2})
	lb := newBalancer(insts[:2])
	load := startCounterLoad(t, keys, lb)
	lb.await(t, 200)

	proxy.Refuse(true)
	proxy.Drop()
	select {
	case <-time.After(*flagStoreCut):
	case <-t.Context().Done():
	}
	proxy.Refuse(false)
	trellistest.WaitSettled(t, insts...)
	lb.await(t, 300)
	h, failed := load()

	t.Logf("owner cut off from Redis for %v (lease %v): %d operations, %d failed; the slowest answered after %v",
		*flagStoreCut, storeCutLease, h.Len(), len(failed), lb.slowestAnswer().Round(time.Millisecond))
	checkHonest(t, failed)
	lincheck.CheckLinearizable(t, h)
}

// TestClusterRedisRestartLinearizable: three instances on a Redis of
// their own that keeps every write (appendfsync always); clients increase
// and read hot counters through the instances that do not own them, and
// the Redis restarts (well within the lease) under that load. The
// history is linearizable, every failure is 503 or 504, and no request
// waits for its timeout: each answers within the restart, two read
// timeouts and a few seconds.
func TestClusterRedisRestartLinearizable(t *testing.T) {
	testenv.Long(t)
	rs := trellistest.StartRedisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	app := &fixture.CounterApp{}
	insts := trellistest.StartInstances(t, 3, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithRedisURL(rs.URL()+"?read_timeout="+freezeReadTimeout.String()+"&write_timeout="+freezeReadTimeout.String()),
		trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = storeCutLease; c.RequestTimeout = 20 * time.Second }))
	trellistest.WaitSettled(t, insts...)
	keys := keysOwnedBy(t, ownersIn(t, insts, rs.Client(t)), []int{0, 1, 2})
	// Each key through the two instances that do not own it.
	lbs := make([]*balancer, len(keys))
	loads := make([]func() (*lincheck.History, []error), len(keys))
	for i := range keys {
		lbs[i] = newBalancer(slices.Delete(slices.Clone(insts), i, i+1))
		loads[i] = startCounterLoad(t, keys[i:i+1], lbs[i])
	}
	for _, lb := range lbs {
		lb.await(t, 100)
	}

	began := time.Now()
	rs.Restart()
	restart := time.Since(began)
	trellistest.WaitSettled(t, insts...)
	for _, lb := range lbs {
		lb.await(t, 100)
	}
	var slowest time.Duration
	for i, load := range loads {
		h, failed := load()
		slowest = max(slowest, lbs[i].slowestAnswer())
		t.Logf("counter %s: %d operations, %d failed", keys[i], h.Len(), len(failed))
		checkHonest(t, failed)
		lincheck.CheckLinearizable(t, h)
	}
	t.Logf("Redis restarted in %v under forwarded load; the slowest answer took %v", restart.Round(time.Millisecond), slowest.Round(time.Millisecond))
	if limit := restart + 2*freezeReadTimeout + 5*time.Second; slowest > limit {
		t.Errorf("a request answered after %v, want within %v", slowest, limit)
	}
}
