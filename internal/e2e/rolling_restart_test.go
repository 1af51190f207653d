package e2e

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// The size of TestBinaryRollingRestart; a longer run, say
// -e2e.roll.rounds=5 -e2e.roll.rate=50.
var (
	flagRollRounds = flag.Int("e2e.roll.rounds", 1, "how many times TestBinaryRollingRestart rolls its three pods")
	flagRollRate   = flag.Int("e2e.roll.rate", 20, "the orders a second TestBinaryRollingRestart places")
)

// rollExpiry is the order expiry of the rolled servers: short, so that
// most orders' timers fire while pods are rolled, and longer than a
// hand-over, so that a confirmation is not overtaken by its expiry.
const rollExpiry = 5 * time.Second

// TestBinaryRollingRestart rolls three server processes as kubelets
// restart the Deployment's pods in place (deploy/kubernetes, its
// lifecycle read from the manifest), under a steady load of orders sent
// round-robin to the ready pods as a Service's endpoints do. Each pod in
// turn leaves the endpoints (the balancer learns it proxyLag later), its
// preStop sleep runs, it is sent SIGTERM and must exit with code 0 within
// the grace period; it is then started again with the same HTTP port and
// advertised cluster address, and its readiness probed as the manifest
// says until it is back in the endpoints and the shards are spread over
// the three again. No request may fail, and the shards' change logs must
// show every order placed, then confirmed or deleted by its expiry: each
// expiry applied exactly once. It logs what sizes a pod: each hand-over
// (SIGTERM until the others serve every shard) and each server's CPU
// and memory under the load.
func TestBinaryRollingRestart(t *testing.T) {
	testenv.Long(t)
	m := readPodManifest(t)
	if proxyLag >= m.preStop {
		t.Fatalf("the preStop sleep %v does not cover the endpoints' lag %v", m.preStop, proxyLag)
	}
	rs := testenv.StartRedisServer(t)
	audit := startChangeAudit(t, rs.Client(t))
	svc := newService(proxyLag)
	secret := "e2e-roll-" + fmt.Sprint(time.Now().UnixNano()) + "-0123456789abcdef"
	pods := make([]*pod, 3)
	for i := range pods {
		pods[i] = startPod(t, m, podEnv(t, m, rs.URL(), secret), svc)
	}
	for _, p := range pods {
		p.awaitReady()
	}
	svc.awaitEndpoints(t, len(pods))
	waitSettled(t, containers(pods)...)
	rate := *flagRollRate
	load := startOrderLoad(t, svc, rate)
	load.await(t, int64(rate))
	measureLoad(t, "before the roll", load, containers(pods), int64(3*rate))

	for round := range *flagRollRounds {
		for i, p := range pods {
			sent := p.terminate()
			others := containers(pods[:i:i])
			others = append(others, containers(pods[i+1:])...)
			waitServed(t, others)
			handOver := time.Since(sent)
			exited := p.awaitExit(sent)
			p.run()
			started := time.Now()
			p.awaitReady()
			ready := time.Since(started)
			waitSettled(t, containers(pods)...)
			svc.awaitEndpoints(t, len(pods)) // back in the endpoints before the next goes
			t.Logf("round %d, pod %d: the others served every shard %v after SIGTERM, it exited after %v; "+
				"restarted, ready after %v, the shards spread again after %v",
				round+1, i+1, handOver.Round(10*time.Millisecond), exited.Round(10*time.Millisecond),
				ready.Round(10*time.Millisecond), time.Since(started).Round(10*time.Millisecond))
			if settle := time.Since(started) - ready; settle > m.minReady {
				t.Logf("the shards took %v after readiness to spread, more than minReadySeconds (%v)", settle, m.minReady)
			}
		}
	}
	measureLoad(t, "after the roll", load, containers(pods), int64(3*rate))
	load.stop()

	orders, failed := load.results()
	for _, err := range failed[:min(len(failed), 5)] {
		t.Errorf("failed: %v", err)
	}
	if len(failed) > 0 || len(orders) < 10 {
		t.Fatalf("%d requests failed, %d orders placed", len(failed), len(orders))
	}
	s := pods[0].current()
	testenv.EventuallyEvery(t, rollExpiry+30*time.Second, 100*time.Millisecond, "every order's timer has run", func() bool {
		_, active, ok := s.metric("trellis_timers_active ")
		return ok && active == 0
	})
	checkOrderWrites(t, orders, audit.orderWrites(t))
	t.Logf("%d orders placed, %d confirmed; no request failed", len(orders), confirmedCount(orders))
}

// podEnv is the environment of a pod of the manifest m on the Redis at
// redisURL: the manifest's own, with its ports loopback ones of its own
// (the advertised cluster address its own, as a pod's IP is), the
// secrets, and the order expiry rollExpiry.
func podEnv(t *testing.T, m podManifest, redisURL, secret string) []string {
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	clusterAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	return append(append([]string(nil), m.env...),
		trellis.EnvHTTPAddr+"="+httpAddr,
		trellis.EnvClusterAddr+"="+clusterAddr,
		trellis.EnvClusterAdvertiseAddr+"="+clusterAddr,
		trellis.EnvRedisURL+"="+redisURL,
		trellis.EnvClusterSecret+"="+secret,
		"TRELLIS_ORDER_EXPIRY="+rollExpiry.String(),
	)
}

// containers is each pod's container now.
func containers(pods []*pod) []*server {
	var cs []*server
	for _, p := range pods {
		cs = append(cs, p.current())
	}
	return cs
}

// waitServed waits (at most a minute) until the servers serve every shard
// between them.
func waitServed(t *testing.T, servers []*server) {
	t.Helper()
	testenv.EventuallyEvery(t, time.Minute, metricsPoll, "the servers serve every shard", func() bool {
		total := 0
		for _, s := range servers {
			_, v, ok := s.metric("trellis_cluster_shards_served ")
			if !ok {
				return false
			}
			total += int(v)
		}
		return total == cluster.NumShards
	})
}

// measureLoad logs each server's CPU use while the load does n more
// orders, and its resident memory and peak after.
func measureLoad(t *testing.T, when string, load *orderLoad, servers []*server, n int64) {
	t.Helper()
	before := make([]procStats, len(servers))
	for i, s := range servers {
		before[i] = procStatsOf(t, s)
	}
	began, orders := time.Now(), load.done.Load()
	load.await(t, n)
	took, orders := time.Since(began), load.done.Load()-orders
	t.Logf("%s: %d orders in %v (%.1f a second)", when, orders, took.Round(10*time.Millisecond), float64(orders)/took.Seconds())
	for i, s := range servers {
		after := procStatsOf(t, s)
		t.Logf("  %s (pid %d): CPU %.0f millicores, resident %.1f MiB, peak %.1f MiB", s.base, s.cmd.Process.Pid,
			1000*(after.cpu-before[i].cpu).Seconds()/took.Seconds(), float64(after.rss)/(1<<20), float64(after.peak)/(1<<20))
	}
}

func procStatsOf(t *testing.T, s *server) procStats {
	t.Helper()
	st, err := readProcStats(s.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("%s: %v", s.base, err)
	}
	return st
}

func confirmedCount(orders []placedOrder) int {
	n := 0
	for _, o := range orders {
		if o.confirmed {
			n++
		}
	}
	return n
}
