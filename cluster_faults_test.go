package trellis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// The cluster under the test kit's faults: an instance killed, and an
// instance partitioned from the others but not from Redis, each under a
// load of increases and reads of hot counters checked for
// linearizability.

// faultLease is the cluster lease of these tests: short, so that a
// partition outlasts it and a killed owner's lease lapses soon.
const faultLease = 2 * time.Second

// startFaultCounters starts three counter instances with the lease
// faultLease (and the configuration changes more makes), and waits until
// they share the shards.
func startFaultCounters(t *testing.T, more func(*trellis.Config)) []*trellistest.Service {
	t.Helper()
	app := &fixture.CounterApp{}
	insts := trellistest.StartInstances(t, 3, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) {
			c.ClusterLease = faultLease
			more(c)
		}))
	trellistest.WaitSettled(t, insts...)
	return insts
}

// TestClusterKilledOwnerServedAgain: under a load of increases and reads
// through the instances in the rotation, the owner of a hot counter is
// killed (and taken out of the rotation): the counter answers again, and
// the killed instance's shards are all served, within the lease and a few
// seconds; the history is linearizable.
func TestClusterKilledOwnerServedAgain(t *testing.T) {
	testenv.Long(t)
	insts := startFaultCounters(t, func(*trellis.Config) {})
	keys := []string{"kill-a", "kill-b", "kill-c"}
	victim := owners(t, insts)(keys[0])
	lb := newBalancer(insts)
	load := startCounterLoad(t, keys, lb)
	lb.await(t, 200)

	lb.remove(insts[victim])
	killed := time.Now()
	insts[victim].Kill()
	live := slices.Delete(slices.Clone(insts), victim, victim+1)
	trellistest.Eventually(t, faultLease+10*time.Second, "the killed owner's counter answers", func() bool {
		_, err := counterCall(live[0], lincheck.CounterOp{Key: keys[0], Read: true})
		return err == nil
	})
	counterBack := time.Since(killed)
	trellistest.Eventually(t, faultLease+10*time.Second, "every shard is served", func() bool {
		return live[0].ShardsServed()+live[1].ShardsServed() == cluster.NumShards
	})
	shardsBack := time.Since(killed)
	lb.await(t, 200)
	h, failed := load()

	t.Logf("owner killed: its counter answered again after %v, every shard was served after %v (lease %v); %d operations, %d failed",
		counterBack.Round(time.Millisecond), shardsBack.Round(time.Millisecond), faultLease, h.Len(), len(failed))
	if limit := faultLease + 5*time.Second; shardsBack > limit {
		t.Errorf("the killed owner's shards were served again after %v, want within %v", shardsBack, limit)
	}
	lincheck.CheckLinearizable(t, h)
}

// TestClusterPartitionLinearizable: under a load of increases and reads
// through every instance, the owner of one hot counter is partitioned
// from the other instances (not from Redis) for twice the lease, then
// healed. It keeps its membership and its shards, so nothing moves; what
// cannot reach the owner of its entity fails with 503 or 504 (the request
// timeout), never with a value; the history is linearizable.
func TestClusterPartitionLinearizable(t *testing.T) {
	testenv.Long(t)
	insts := startFaultCounters(t, func(c *trellis.Config) { c.RequestTimeout = 2 * time.Second })
	const victim = 2
	want := []int{victim, 0, 1} // the owner of each key
	ownerOf := owners(t, insts)
	keys := keysOwnedBy(t, ownerOf, want)
	lb := newBalancer(insts)
	load := startCounterLoad(t, keys, lb)
	lb.await(t, 200)

	served := shardsServed(insts)
	insts[victim].Partition()
	select {
	case <-time.After(2 * faultLease):
	case <-t.Context().Done():
	}
	if now := shardsServed(insts); !slices.Equal(now, served) {
		t.Errorf("shards served %v after a partition of %v, %v before: nothing should move", now, 2*faultLease, served)
	}
	for i, k := range keys {
		if o := ownerOf(k); o != want[i] {
			t.Errorf("counter %s is owned by instance %d after the partition, want %d", k, o, want[i])
		}
	}
	insts[victim].Heal()
	lb.await(t, 300)
	h, failed := load()

	statuses := map[int]int{}
	for _, err := range failed {
		var se *statusError
		if !errors.As(err, &se) || (se.status != http.StatusServiceUnavailable && se.status != http.StatusGatewayTimeout) {
			t.Errorf("failed otherwise than with 503 or 504: %v", err)
			continue
		}
		statuses[se.status]++
	}
	t.Logf("partition of %v: %d operations, %d failed (503: %d, 504: %d)",
		2*faultLease, h.Len(), len(failed), statuses[http.StatusServiceUnavailable], statuses[http.StatusGatewayTimeout])
	if len(failed) == 0 {
		t.Errorf("no operation failed: the partition cut nothing off")
	}
	lincheck.CheckLinearizable(t, h)
}

// balancer plays a load balancer: it sends each request to one of the
// instances in its rotation at random, and counts the answers and the
// time the slowest took.
type balancer struct {
	mu       sync.Mutex
	live     []*trellistest.Service
	answered atomic.Int64
	slowest  atomic.Int64 // nanoseconds
}

func newBalancer(insts []*trellistest.Service) *balancer {
	return &balancer{live: slices.Clone(insts)}
}

func (b *balancer) pick(rng *rand.Rand) (*trellistest.Service, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sent := time.Now()
	return b.live[rng.IntN(len(b.live))], func() {
		b.answered.Add(1)
		took := int64(time.Since(sent))
		for old := b.slowest.Load(); took > old && !b.slowest.CompareAndSwap(old, took); old = b.slowest.Load() {
		}
	}
}

// slowestAnswer is the longest any request took so far.
func (b *balancer) slowestAnswer() time.Duration { return time.Duration(b.slowest.Load()) }

// remove takes ts out of the rotation.
func (b *balancer) remove(ts *trellistest.Service) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live = slices.DeleteFunc(b.live, func(l *trellistest.Service) bool { return l == ts })
}

// await waits until n more requests have been answered (or failed).
func (b *balancer) await(t *testing.T, n int64) {
	t.Helper()
	want := b.answered.Load() + n
	trellistest.Eventually(t, time.Minute, fmt.Sprintf("%d more answers", n), func() bool { return b.answered.Load() >= want })
}

// startCounterLoad starts six clients sending increases and reads of keys
// through lb; the function it returns stops them and returns the history
// and the failed operations.
func startCounterLoad(t *testing.T, keys []string, lb *balancer) func() (*lincheck.History, []error) {
	var stopped atomic.Bool
	type outcome struct {
		h      *lincheck.History
		failed []error
	}
	done := make(chan outcome, 1)
	go func() {
		h, failed := runCounterLoad(t, keys, 6, func() bool { return !stopped.Load() }, lb.pick)
		done <- outcome{h, failed}
	}()
	return func() (*lincheck.History, []error) {
		stopped.Store(true)
		res := trellistest.Recv(t, done, time.Minute)
		return res.h, res.failed
	}
}

// shardsServed is how many shards each instance serves now.
func shardsServed(insts []*trellistest.Service) []int {
	out := make([]int, len(insts))
	for i, ts := range insts {
		out[i] = ts.ShardsServed()
	}
	return out
}

// keysOwnedBy names one counter for each entry of owners, owned by the
// instance of that index.
func keysOwnedBy(t *testing.T, ownerOf func(id string) int, owners []int) []string {
	t.Helper()
	keys := make([]string, len(owners))
	for i, want := range owners {
		for n := 0; keys[i] == ""; n++ {
			if k := fmt.Sprintf("part-%d-%d", i, n); ownerOf(k) == want {
				keys[i] = k
			}
		}
	}
	return keys
}

// owners returns a function that tells the index in insts of the
// instance that owns a counter, as its shard record in Redis says.
func owners(t *testing.T, insts []*trellistest.Service) func(id string) int {
	t.Helper()
	return ownersIn(t, insts, trellistest.Redis(t))
}

// ownersIn is owners for instances on the Redis rdb reaches.
func ownersIn(t *testing.T, insts []*trellistest.Service, rdb redis.Cmdable) func(id string) int {
	t.Helper()
	ids := make([]string, len(insts))
	for i, ts := range insts {
		ids[i] = memberID(t, ts)
	}
	space := keyspace.Must(insts[0].Host().Config.RedisPrefix)
	return func(id string) int {
		t.Helper()
		key := cluster.ShardRecordKey(space, cluster.ShardOf(counter.Entity.ComponentID(), id))
		owner, err := rdb.HGet(context.Background(), key, "owner").Result()
		if err != nil {
			t.Fatalf("read the owner of %s: %v", id, err)
		}
		i := slices.Index(ids, owner)
		if i < 0 {
			t.Fatalf("counter %s is owned by %q, none of the instances", id, owner)
		}
		return i
	}
}

// memberID is ts's member id, as its /metrics names it.
func memberID(t *testing.T, ts *trellistest.Service) string {
	t.Helper()
	for line := range strings.Lines(string(ts.Get(t, "/metrics").Body)) {
		if rest, ok := strings.CutPrefix(line, "trellis_cluster_member{"); ok {
			_, after, ok := strings.Cut(rest, `member="`)
			if id, _, ok2 := strings.Cut(after, `"`); ok && ok2 {
				return id
			}
		}
	}
	t.Fatalf("no trellis_cluster_member on /metrics")
	return ""
}
