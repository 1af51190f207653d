package trellistest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// faultLease is the cluster lease of the fault tests: short, so that a
// killed instance's membership lapses soon.
const faultLease = 2 * time.Second

// startFaultCluster starts two counter instances with a short lease and
// request timeout, and waits until they share the shards.
func startFaultCluster(t *testing.T) []*trellistest.Service {
	t.Helper()
	app := &fixture.CounterApp{}
	insts := trellistest.StartInstances(t, 2, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) {
			c.ClusterLease = faultLease
			c.RequestTimeout = time.Second
		}))
	trellistest.WaitSettled(t, insts...)
	return insts
}

// TestKill: a killed instance refuses connections at once, leaves its
// membership in Redis to lapse (it did not leave), and its shards are
// served by the other instance after the lease; the test's end has
// nothing left to stop.
func TestKill(t *testing.T) {
	trellistest.Long(t)
	insts := startFaultCluster(t)
	rdb := trellistest.Redis(t)
	members := insts[0].Host().Config.RedisPrefix + ":cluster:{members}:member:*"
	insts[1].Kill()
	killed := time.Now()
	if c, err := net.DialTimeout("tcp", insts[1].Addr().String(), time.Second); err == nil {
		_ = c.Close()
		t.Errorf("the killed instance's HTTP port still accepts connections")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial the killed instance: %v, want connection refused", err)
	}
	if keys, err := rdb.Keys(t.Context(), members).Result(); err != nil || len(keys) != 2 {
		t.Errorf("member keys right after the kill: %v (%v), want both: a killed instance does not leave", keys, err)
	}
	trellistest.Eventually(t, faultLease+10*time.Second, "the live instance serves every shard", func() bool {
		return insts[0].ShardsServed() == 256
	})
	t.Logf("shards served again %v after the kill (lease %v)", time.Since(killed).Round(time.Millisecond), faultLease)
	if keys, err := rdb.Keys(t.Context(), members).Result(); err != nil || len(keys) != 1 {
		t.Errorf("member keys once the lease lapsed: %v (%v), want one", keys, err)
	}
	insts[1].Kill() // twice: harmless
}

// TestPartition: while one instance is partitioned from the other (not
// from Redis), each answers for its own entities only, and fails the
// others' honestly (503 or 504, never a value); nothing moves; once
// healed, each answers for every entity again.
func TestPartition(t *testing.T) {
	trellistest.Long(t)
	insts := startFaultCluster(t)
	ids := make([]string, 16)
	for i := range ids {
		ids[i] = fmt.Sprintf("part-%d", i)
		insts[0].Post(t, "/counters/"+ids[i]+"/increase", map[string]int{"by": 1})
	}
	served := []int{insts[0].ShardsServed(), insts[1].ShardsServed()}

	insts[1].Partition()
	start := time.Now()
	via0, via1 := readAll(t, insts[0], ids), readAll(t, insts[1], ids)
	t.Logf("while partitioned, in %v: through instance 0 %v, through 1 %v", time.Since(start).Round(time.Millisecond), via0, via1)
	for i, id := range ids {
		if ok0, ok1 := via0[i] == http.StatusOK, via1[i] == http.StatusOK; ok0 == ok1 {
			t.Errorf("%s while partitioned: %d through instance 0, %d through 1; want one answer and one failure", id, via0[i], via1[i])
		}
		for _, s := range []int{via0[i], via1[i]} {
			if s != http.StatusOK && s != http.StatusServiceUnavailable && s != http.StatusGatewayTimeout {
				t.Errorf("%s while partitioned: status %d, want 200, 503 or 504", id, s)
			}
		}
	}
	if now := []int{insts[0].ShardsServed(), insts[1].ShardsServed()}; now[0] != served[0] || now[1] != served[1] {
		t.Errorf("shards served %v while partitioned, %v before: nothing should move", now, served)
	}

	insts[1].Heal()
	trellistest.Eventually(t, 10*time.Second, "every counter answers through either instance", func() bool {
		for _, ts := range insts {
			for _, s := range readAll(t, ts, ids) {
				if s != http.StatusOK {
					return false
				}
			}
		}
		return true
	})
}

// readAll reads the counters ids through ts, all at once, and returns
// the statuses.
func readAll(t *testing.T, ts *trellistest.Service, ids []string) []int {
	t.Helper()
	statuses := make([]int, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := ts.Call(ctx, http.MethodGet, "/counters/"+id, nil)
			if err != nil {
				t.Errorf("read %s: %v", id, err)
				return
			}
			statuses[i] = resp.Status
		})
	}
	wg.Wait()
	return statuses
}
