package e2e

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestBinaryRollingUpdate rolls three server processes as the Kubernetes
// Deployment of deploy/kubernetes does (maxSurge 1, maxUnavailable 0),
// under a load of increases and reads through a balancer of the ready
// ones: for each old server in turn, a new one is started, its /readyz
// polled until it answers 200 and the shards settled (minReadySeconds),
// it is put behind the balancer, the old one is taken out and, once its
// requests are answered, sent SIGTERM, which must end it with exit code 0
// within its shutdown timeout (stop fails the test otherwise). No request
// fails, and the history is linearizable.
func TestBinaryRollingUpdate(t *testing.T) {
	testenv.Long(t)
	rs := testenv.StartRedisServer(t)
	env := clusterEnv(rs.URL(), ownerLease, ownerRequestTimeout)
	old := []*server{startServer(t, env), startServer(t, env), startServer(t, env)}
	waitSettled(t, old...)
	svc := newService(0, old...)
	keys := []string{"roll-a", "roll-b", "roll-c", "roll-d"}
	load := startCounterLoadOn(t, func(*rand.Rand) (*server, func()) { return svc.pick() }, keys, 4)
	load.await(t, 100)

	live := slices.Clone(old)
	for i, o := range old {
		began := time.Now()
		n := startServer(t, env) // returns once /readyz answers 200
		live = append(live, n)
		waitSettled(t, live...)
		svc.set(n, true)
		svc.set(o, false)
		svc.awaitIdle(o) // the preStop pause: the requests sent to it are answered
		o.stop()
		live = slices.DeleteFunc(live, func(s *server) bool { return s == o })
		waitSettled(t, live...)
		t.Logf("server %d replaced in %v", i+1, time.Since(began).Round(time.Millisecond))
		load.await(t, 50)
	}
	load.stop()

	failed := load.errors()
	for _, err := range failed[:min(len(failed), 5)] {
		t.Errorf("failed operation: %v", err)
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d operations failed during the roll", len(failed), load.h.Len())
	}
	for _, key := range keys {
		final := load.do(-1, live[0], lincheck.CounterOp{Key: key, Read: true})
		tally := load.h.Tallies()[key]
		if final.Unknown || final.Value != int64(tally.Increases) {
			t.Errorf("%s: final value %+v, want the %d increases answered", key, final, tally.Increases)
		}
	}
	t.Logf("%d operations, none failed; the slowest answered after %v", load.h.Len(), load.slowestAnswer().Round(time.Millisecond))
	// For sizing the pods (docs/kubernetes.md#sizing): each new server's
	// resident memory and CPU time after its part of the roll and the load.
	for _, s := range live {
		_, rss, _ := s.metric("process_resident_memory_bytes ")
		_, cpu, _ := s.metric("process_cpu_seconds_total ")
		t.Logf("%s: resident memory %.1f MiB, CPU %.2f s", s.base, rss/(1<<20), cpu)
	}
	lincheck.CheckLinearizable(t, load.h)
}
