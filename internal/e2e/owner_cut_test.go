package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/samples/counter"
)

// flagOwnerCut is how long TestBinaryClusterLinearizable cuts the owner
// off from Redis (two leases by default; longer runs with a larger value,
// say -e2e.ownercut=20s -count=5).
var flagOwnerCut = flag.Duration("e2e.ownercut", 2*ownerLease,
	"how long TestBinaryClusterLinearizable cuts the hot counter's owner off from Redis")

// ownerLease is the cluster lease of the servers below: shorter than the
// request timeout, as every lease that lets a command outlive it is.
const ownerLease = 3 * time.Second

// ownerRequestTimeout is the servers' request timeout.
const ownerRequestTimeout = 20 * time.Second

// TestBinaryClusterLinearizable: three server processes on one Redis,
// the third of which reaches it through a TCP proxy and owns a hot
// counter; six clients increase and read the counter through the other
// two only, so that every command is forwarded to its owner. Then the
// owner fails, in each case otherwise: cut off from Redis for longer
// than the lease (its connections blackholed, new ones refused: writes
// in flight are applied and their answers lost), or killed with SIGKILL.
// No command may take effect twice: the history is linearizable, every
// failure is a 503 or 504, and the counter's final value is at least the
// increases answered and at most those plus the ones of unknown outcome.
func TestBinaryClusterLinearizable(t *testing.T) {
	testenv.Long(t)
	tests := []struct {
		name  string
		fault func(t *testing.T, owner *server, proxy *peertest.Proxy) // breaks the owner; returns once it may serve again, or never will
		alive int                                                      // the servers that serve afterwards: the first alive of three
	}{
		{name: "owner cut from Redis", alive: 3, fault: func(t *testing.T, _ *server, proxy *peertest.Proxy) {
			proxy.Refuse(true)
			proxy.Drop()
			select {
			case <-time.After(*flagOwnerCut):
			case <-t.Context().Done():
			}
			proxy.Refuse(false)
		}},
		{name: "owner killed", alive: 2, fault: func(_ *testing.T, owner *server, _ *peertest.Proxy) { owner.kill9() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := testenv.StartRedisServer(t)
			proxy := peertest.NewProxy(t, rs.Addr())
			servers := []*server{
				startServer(t, clusterEnv(rs.URL(), ownerLease, ownerRequestTimeout)),
				startServer(t, clusterEnv(rs.URL(), ownerLease, ownerRequestTimeout)),
				startServer(t, clusterEnv("redis://"+proxy.Addr()+"/0", ownerLease, ownerRequestTimeout)),
			}
			waitSettled(t, servers...)
			hot := counterOwnedBy(t, rs.Client(t), servers[2].memberID(t))
			load := startCounterLoad(t, servers[:2], []string{hot}, 6)
			load.await(t, 200)

			began := time.Now()
			tt.fault(t, servers[2], proxy)
			waitSettled(t, servers[:tt.alive]...)
			t.Logf("the cluster settled %v after the fault began", time.Since(began).Round(time.Millisecond))
			load.await(t, 300)
			load.stop()
			final := load.do(-1, servers[0], lincheck.CounterOp{Key: hot, Read: true})

			failed := load.errors()
			for _, err := range failed[:min(len(failed), 5)] {
				t.Logf("failed operation: %v", err)
			}
			for _, err := range failed {
				var ae *answerError
				if !errors.As(err, &ae) || (ae.status != http.StatusServiceUnavailable && ae.status != http.StatusGatewayTimeout) {
					t.Errorf("failed otherwise than with 503 or 504: %v", err)
				}
			}
			tally := load.h.Tallies()[hot]
			t.Logf("%d operations, %d failed; %d increases answered, %d of unknown outcome; final value %d; the slowest answered after %v",
				load.h.Len(), len(failed), tally.Increases, tally.Unknown, final.Value, load.slowestAnswer().Round(time.Millisecond))
			if final.Unknown {
				t.Fatalf("the final read failed")
			}
			if lo, hi := int64(tally.Increases), int64(tally.Increases+tally.Unknown); final.Value < lo || final.Value > hi {
				t.Errorf("final value %d, want between %d (the increases answered) and %d (and those of unknown outcome)", final.Value, lo, hi)
			}
			lincheck.CheckLinearizable(t, load.h)
		})
	}
}

// counterOwnedBy names a counter of the counter sample whose shard the
// member member owns, as the shard records in rdb say.
func counterOwnedBy(t *testing.T, rdb redis.Cmdable, member string) string {
	t.Helper()
	space := keyspace.Must("trellis")
	for n := range 10 * cluster.NumShards {
		id := fmt.Sprintf("hot-%d", n)
		key := cluster.ShardRecordKey(space, cluster.ShardOf(counter.Entity.ComponentID(), id))
		owner, err := rdb.HGet(context.Background(), key, "owner").Result()
		if err != nil {
			t.Fatalf("read the owner of counter %s: %v", id, err)
		}
		if owner == member {
			return id
		}
	}
	t.Fatalf("no counter among %d is owned by member %s", 10*cluster.NumShards, member)
	return ""
}
