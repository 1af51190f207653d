package e2e

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// endpoints is a Service's endpoints as a load balancer sees them: the
// ready servers it sends requests to, and how many requests each has in
// flight.
type endpoints struct {
	mu       sync.Mutex
	ready    []*server
	inFlight map[*server]int
	changed  *sync.Cond
}

func newEndpoints(servers ...*server) *endpoints {
	e := &endpoints{ready: slices.Clone(servers), inFlight: map[*server]int{}}
	e.changed = sync.NewCond(&e.mu)
	return e
}

// pick is one of the ready servers at random, and what to call once its
// request is answered.
func (e *endpoints) pick(rng *rand.Rand) (*server, func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.ready[rng.IntN(len(e.ready))]
	e.inFlight[s]++
	return s, func() {
		e.mu.Lock()
		e.inFlight[s]--
		e.changed.Broadcast()
		e.mu.Unlock()
	}
}

// add puts s behind the balancer: it passed its readiness probe.
func (e *endpoints) add(s *server) {
	e.mu.Lock()
	e.ready = append(e.ready, s)
	e.mu.Unlock()
}

// remove takes s out of the balancer and waits until the requests sent to
// it are answered: what the pod's removal from the endpoints and its
// preStop pause do before the SIGTERM.
func (e *endpoints) remove(s *server) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ready = slices.DeleteFunc(e.ready, func(r *server) bool { return r == s })
	for e.inFlight[s] > 0 {
		e.changed.Wait()
	}
}

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
	eps := newEndpoints(old...)
	keys := []string{"roll-a", "roll-b", "roll-c", "roll-d"}
	load := startCounterLoadOn(t, eps.pick, keys, 4)
	load.await(t, 100)

	live := slices.Clone(old)
	for i, o := range old {
		began := time.Now()
		n := startServer(t, env) // returns once /readyz answers 200
		live = append(live, n)
		waitSettled(t, live...)
		eps.add(n)
		eps.remove(o)
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
