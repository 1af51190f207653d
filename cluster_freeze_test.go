package trellis_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// freezeReadTimeout is the Redis read timeout of the freeze tests: what a
// command waits for a frozen Redis before it gives up.
const freezeReadTimeout = time.Second

// TestClusterRedisFreezeAnswersInTime: three instances on a Redis of their
// own under a load of increases and reads of hot counters through every
// instance; the Redis is frozen for twice the lease (every membership
// lapses) and thawed. Every request answers within two read timeouts
// while it is frozen, and within the time the instances take to join
// again and take their shards back once it is thawed, never at the
// request's timeout; the history is linearizable.
func TestClusterRedisFreezeAnswersInTime(t *testing.T) {
	testenv.Long(t)
	rs := trellistest.StartRedisServer(t)
	app := &fixture.CounterApp{}
	insts := trellistest.StartInstances(t, 3, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithRedisURL(rs.URL()+"?read_timeout="+freezeReadTimeout.String()+"&write_timeout="+freezeReadTimeout.String()),
		trellistest.WithConfig(func(c *trellis.Config) {
			c.ClusterLease = faultLease
			c.RequestTimeout = 20 * time.Second
		}))
	trellistest.WaitSettled(t, insts...)
	keys := []string{"freeze-a", "freeze-b", "freeze-c"}
	lb := newBalancer(insts)
	load := startCounterLoad(t, keys, lb)
	lb.await(t, 200)

	rs.Freeze()
	select {
	case <-time.After(2 * faultLease):
	case <-t.Context().Done():
	}
	rs.Thaw()
	thawed := time.Now()
	trellistest.WaitSettled(t, insts...)
	settled := time.Since(thawed)
	lb.await(t, 300)
	h, failed := load()

	slowest := lb.slowestAnswer()
	t.Logf("Redis frozen for %v: %d operations, %d failed; the slowest answered after %v; the instances served every shard again %v after the thaw",
		2*faultLease, h.Len(), len(failed), slowest.Round(time.Millisecond), settled.Round(time.Millisecond))
	if limit := 2*freezeReadTimeout + settled + 2*time.Second; slowest > limit {
		t.Errorf("a request answered after %v, want within %v (two read timeouts, and the time the shards took to be served again)", slowest, limit)
	}
	checkHonest(t, failed)
	lincheck.CheckLinearizable(t, h)
}
