package trellis_test

import (
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

var flagFailoverKill = flag.Bool("failover.kill", false,
	"TestClusterRedisFailover also kills a master with SIGKILL under the load (about 15 s more)")

// TestClusterRedisFailover: three instances in the cluster mode on a
// Redis Cluster of the test's own (3 masters, a replica each), under a
// load of increases and reads of three hot counters through every
// instance, while the master that holds the first counter fails over.
//
// A graceful failover (CLUSTER FAILOVER on its replica, which waits until
// the replica has every write) loses nothing: the history is
// linearizable. With -failover.kill, the master that then holds the
// counter is killed with SIGKILL, and its replica is promoted after
// cluster-node-timeout: replication is asynchronous, so acknowledged
// writes may be lost (see "What a failover can lose" in
// docs/redis-cluster.md). That phase asserts only that every failure is
// an honest 503 or 504 and that the counters answer again, and reports
// the verdict and the acknowledged increases lost.
func TestClusterRedisFailover(t *testing.T) {
	testenv.Long(t)
	rc := trellistest.StartCluster(t)
	// Runs last: the clients of a killed master's pool see their close late.
	t.Cleanup(func() { testenv.WaitGoroutinesGone(t, "(*ConnPool).tryDial") })
	app := &fixture.CounterApp{}
	prefix := "failover-" + time.Now().Format("150405.000")
	insts := trellistest.StartInstances(t, 3, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithStorePrefix(prefix), trellistest.WithConfig(func(c *trellis.Config) {
			c.RedisURL, c.RedisClusterURL = "", rc.URL()
			c.RequestTimeout = 5 * time.Second
		}))
	trellistest.WaitSettled(t, insts...)
	client := rc.Client(t)
	holder := func(id string) string { // the master that holds counter id's shard, once the client's slot map is fresh
		key := cluster.ShardRecordKey(keyspace.Must(prefix), cluster.ShardOf(counter.Entity.ComponentID(), id))
		var addr string
		trellistest.Eventually(t, 10*time.Second, "the client knows the master of "+key, func() bool {
			m, err := client.MasterForKey(t.Context(), key)
			if err != nil {
				return false
			}
			addr = m.Options().Addr
			roles, err := rc.Roles("")
			return err == nil && slices.ContainsFunc(roles, func(r testenv.Role) bool { return r.Addr == addr && r.Master })
		})
		return addr
	}

	cases := []struct {
		name  string
		crash bool // only with -failover.kill; reports a loss rather than fails on it
		// failover makes master fail over to replica under the load, and
		// returns when the failure began.
		failover func(t *testing.T, lb *balancer, master, replica string) (began time.Time)
	}{
		{name: "graceful", failover: func(t *testing.T, _ *balancer, _, replica string) time.Time {
			began := time.Now()
			r := redis.NewClient(&redis.Options{Addr: replica})
			defer r.Close()
			if err := r.ClusterFailover(t.Context()).Err(); err != nil {
				t.Fatalf("CLUSTER FAILOVER on %s: %v", replica, err)
			}
			return began
		}},
		{name: "kill", crash: true, failover: func(_ *testing.T, _ *balancer, master, _ string) time.Time {
			began := time.Now()
			rc.Kill9(master)
			return began
		}},
		// A replica that lags: frozen, and its replication link cut by its
		// master (so that no write waits in its socket either) while 100
		// operations are answered, then thawed as its master is killed,
		// it is promoted without the writes its master acknowledged
		// meanwhile.
		{name: "kill-lagging", crash: true, failover: func(t *testing.T, lb *balancer, master, replica string) time.Time {
			rc.Freeze(replica)
			m := redis.NewClient(&redis.Options{Addr: master})
			defer m.Close()
			if err := m.ClientKillByFilter(t.Context(), "TYPE", "replica").Err(); err != nil {
				t.Fatalf("cut the replication link of %s: %v", master, err)
			}
			lb.await(t, 100)
			began := time.Now()
			rc.Kill9(master)
			rc.Thaw(replica)
			return began
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.crash && !*flagFailoverKill {
				t.Skip("run with -failover.kill")
			}
			keys := []string{tc.name + "-a", tc.name + "-b", tc.name + "-c"}
			master := holder(keys[0])
			replica := replicaOf(t, rc, master)
			h, failed := underLoad(t, insts, keys, func(lb *balancer) time.Duration {
				began := tc.failover(t, lb, master, replica)
				awaitMaster(t, rc, replica, master)
				return time.Since(began)
			})
			checkHonest(t, failed)
			if tc.crash {
				reportLoss(t, insts[0], keys, h)
			} else {
				lincheck.CheckLinearizable(t, h)
			}
		})
	}
}

// reportLoss logs porcupine's verdict on h and, for each counter, what
// was acknowledged against its value now read through ts: how many
// acknowledged increases were lost, at least.
func reportLoss(t *testing.T, ts *trellistest.Service, keys []string, h *lincheck.History) {
	t.Helper()
	verdict := map[porcupine.CheckResult]string{porcupine.Ok: "linearizable", porcupine.Illegal: "NOT linearizable",
		porcupine.Unknown: "unknown (the check timed out)"}[h.Check()]
	lost := 0
	tallies := h.Tallies()
	for _, k := range keys {
		final := fixture.Counter(t, ts.Get(t, "/counters/"+k)).Value
		lost += max(0, tallies[k].Increases-int(final))
		t.Logf("%s: %d increases acknowledged, %d of unknown outcome, highest value answered %d, value now %d",
			k, tallies[k].Increases, tallies[k].Unknown, tallies[k].Highest, final)
	}
	t.Logf("the history is %s; at least %d acknowledged increases lost", verdict, lost)
}

// underLoad runs clients sending increases and reads of keys through
// every instance, fails the Redis Cluster over with failover (which
// returns how long the promotion took) once they are going, and stops
// them once 300 more operations were answered after it.
func underLoad(t *testing.T, insts []*trellistest.Service, keys []string, failover func(*balancer) time.Duration) (*lincheck.History, []error) {
	t.Helper()
	lb := newBalancer(insts)
	load := startCounterLoad(t, keys, lb)
	lb.await(t, 200)
	promoted := failover(lb)
	back := time.Now()
	lb.await(t, 300)
	h, failed := load()
	t.Logf("replica promoted %v after the failover began; 300 operations answered %v later; %d operations, %d failed",
		promoted.Round(time.Millisecond), time.Since(back).Round(time.Millisecond), h.Len(), len(failed))
	return h, failed
}

// checkHonest fails the test for a failure other than 503 or 504.
func checkHonest(t *testing.T, failed []error) {
	t.Helper()
	for _, err := range failed {
		var se *statusError
		if !errors.As(err, &se) || (se.status != http.StatusServiceUnavailable && se.status != http.StatusGatewayTimeout) {
			t.Errorf("failed otherwise than with 503 or 504: %v", err)
		}
	}
}

// replicaOf is the address of the replica of master.
func replicaOf(t *testing.T, rc *trellistest.Cluster, master string) string {
	t.Helper()
	roles, err := rc.Roles("")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roles {
		if !r.Master && r.Of == master {
			return r.Addr
		}
	}
	t.Fatalf("no replica of %s among %+v", master, roles)
	return ""
}

// awaitMaster waits until replica is a master, as a node other than
// the old master sees it.
func awaitMaster(t *testing.T, rc *trellistest.Cluster, replica, old string) {
	t.Helper()
	trellistest.Eventually(t, 30*time.Second, replica+" promoted", func() bool {
		roles, err := rc.Roles(old)
		if err != nil {
			return false
		}
		for _, r := range roles {
			if r.Addr == replica && r.Master {
				return true
			}
		}
		return false
	})
}
