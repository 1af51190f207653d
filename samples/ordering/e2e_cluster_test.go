package ordering_test

// End-to-end tests of the order sample on a Redis Cluster of the test's
// own (3 masters, 3 replicas): the real binary, two instances, real HTTP.

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

// newClusterConfig starts a cluster for the test and returns a server
// configuration on it.
func newClusterConfig(t *testing.T, expiry time.Duration) (serverConfig, *trellistest.Cluster) {
	cl := trellistest.StartCluster(t)
	return serverConfig{clusterURL: cl.URL(), expiry: expiry, adminToken: "e2e-admin-" + rand.Text()}, cl
}

// Two instances on a cluster: orders placed on one and confirmed or read
// on the other give the answers one instance would; the service's keys are
// spread over the three masters (each holds 20–50 %); every unconfirmed
// order expires, each expiry running exactly once across both instances.
func TestE2EClusterTwoInstances(t *testing.T) {
	t.Parallel()
	cfg, cl := newClusterConfig(t, 5*time.Second)
	servers := []*server{startServer(t, cfg), startServer(t, cfg)}
	c := newClient(t, cfg.adminToken)

	const n = 150
	orders := make([]contract.Order, n)
	expiring := 0
	for i := range orders {
		on, other := servers[i%2], servers[(i+1)%2]
		orders[i] = place(t, c, on.base, "cluster-"+strconv.Itoa(i), i%5+1)
		if i%3 == 0 {
			if r := c.do(http.MethodPost, other.base+"/orders/"+orders[i].Id+"/confirm", ""); r == nil || r.status != http.StatusOK {
				t.Fatalf("confirm %d on the other instance: %v", i, r)
			}
			orders[i].Confirmed = true
		} else {
			expiring++
		}
		if status, got := getOrder(c, other.base, orders[i].Id); status != http.StatusOK || got != orders[i] {
			t.Fatalf("order %d on the other instance: %d %+v, want 200 %+v", i, status, got, orders[i])
		}
	}

	// Counted while the timers are pending: entities and timer partitions.
	shares := trellistest.KeysPerMaster(t, cl.Client(t), defaultPrefix+":*")
	total := 0
	for _, k := range shares {
		total += k
	}
	if len(shares) != 3 {
		t.Fatalf("keys per master = %v, want 3 masters", shares)
	}
	for addr, k := range shares {
		if share := float64(k) / float64(total); share < 0.2 || share > 0.5 {
			t.Errorf("master %s holds %.0f %% of the %d keys, want 20–50 %% (all: %v)", addr, 100*share, total, shares)
		}
	}
	t.Logf("keys per master: %v", shares)

	eventually(t, cfg.expiry+fireMargin, "every timer has run", func() (bool, string) {
		active, detail := activeTimers(c, servers[0].base)
		return active == 0, detail
	})
	for i, o := range orders {
		status, got := getOrder(c, servers[i%2].base, o.Id)
		switch {
		case o.Confirmed && (status != http.StatusOK || got != o):
			t.Fatalf("confirmed order %d: %d %+v, want 200 %+v", i, status, got, o)
		case !o.Confirmed && status != http.StatusNotFound:
			t.Fatalf("unconfirmed order %d: %d %+v, want 404 (expired)", i, status, got)
		}
	}
	fired := firedAcross(t, c, servers, expiring)
	if len(fired) != 1 || fired["success"] != float64(expiring) {
		t.Errorf("timer calls by result across both instances: %v, want only success %d", fired, expiring)
	}
}

// firedAcross sums trellis_timers_fired_total by result over servers,
// polling until the successes reach at least want (the counters are
// bumped as outcomes are recorded).
func firedAcross(t *testing.T, c *client, servers []*server, want int) map[string]float64 {
	t.Helper()
	var fired map[string]float64
	eventually(t, 5*time.Second, "the fired counters add up", func() (bool, string) {
		fired = map[string]float64{}
		for _, s := range servers {
			for result, v := range firedTotals(t, c, s.base) {
				fired[result] += v
			}
		}
		return fired["success"] >= float64(want), fmt.Sprint(fired)
	})
	return fired
}

// placed is an order of the failover test and what became of it.
type placed struct {
	id string
	// confirm is the outcome of its confirm request: 0 none sent, 200
	// confirmed, -1 sent but with no answer or an error status, so it
	// may or may not have been confirmed.
	confirm int
}

// A master killed with kill -9 in the middle of traffic on two instances:
// its replica takes over, both instances answer again by themselves within
// 15 s of the promotion, and afterwards every order that was placed has
// either expired or stayed confirmed.
func TestE2EClusterFailover(t *testing.T) {
	t.Parallel()
	cfg, cl := newClusterConfig(t, 4*time.Second)
	servers := []*server{startServer(t, cfg), startServer(t, cfg)}
	c := newClient(t, cfg.adminToken)
	// The traffic's own client: its requests may fail during the failover,
	// which is not a test failure, so it does not report them.
	traffic := &client{t: t, http: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(traffic.http.CloseIdleConnections)

	var (
		mu      sync.Mutex
		orders  []placed
		failed  atomic.Int64 // requests without a 2xx answer
		stop    = make(chan struct{})
		workers sync.WaitGroup
	)
	for w := range 8 {
		workers.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				on, other := servers[(w+k)%2], servers[(w+k+1)%2]
				r := traffic.try(http.MethodPost, on.base+"/orders", `{"item":"failover","quantity":1}`)
				var o contract.Order
				if r == nil || r.status != http.StatusCreated || json.Unmarshal(r.body, &o) != nil {
					failed.Add(1)
					continue
				}
				p := placed{id: o.Id}
				if k%2 == 0 {
					p.confirm = -1
					if r := traffic.try(http.MethodPost, other.base+"/orders/"+o.Id+"/confirm", ""); r != nil && r.status == http.StatusOK {
						p.confirm = http.StatusOK
					} else {
						failed.Add(1)
					}
				}
				mu.Lock()
				orders = append(orders, p)
				mu.Unlock()
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		workers.Wait()
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(orders)
	}
	eventually(t, 30*time.Second, "100 orders placed before the kill", func() (bool, string) {
		return count() >= 100, strconv.Itoa(count())
	})

	roles, err := cl.Roles("")
	if err != nil {
		t.Fatal(err)
	}
	var victim, heir string
	for _, r := range roles {
		if !r.Master {
			victim, heir = r.Of, r.Addr
			break
		}
	}
	before := count()
	cl.Kill9(victim)
	killedAt := time.Now()
	t.Logf("killed master %s after %d orders; its replica is %s", victim, before, heir)

	var promotedAt time.Time
	eventually(t, trellistest.ClusterNodeTimeout+30*time.Second, "the replica "+heir+" to be promoted", func() (bool, string) {
		roles, err := cl.Roles(victim)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range roles {
			if r.Addr == heir && r.Master {
				promotedAt = time.Now()
				return true, ""
			}
		}
		return false, fmt.Sprint(roles)
	})
	// Answering again means placing an order on each instance: that
	// writes an entity and a timer and counts the timers of every
	// partition, so it needs every master, the new one included.
	eventually(t, 20*time.Second, "both instances to place orders again", func() (bool, string) {
		for _, s := range servers {
			if r := c.try(http.MethodPost, s.base+"/orders", `{"item":"probe","quantity":1}`); r == nil || r.status != http.StatusCreated {
				return false, fmt.Sprint(r)
			}
		}
		return true, ""
	})
	answeredAt := time.Now()
	recovery := answeredAt.Sub(promotedAt)
	t.Logf("promotion %v after the kill; both instances answered again %v after the promotion",
		promotedAt.Sub(killedAt).Round(time.Millisecond), recovery.Round(time.Millisecond))
	if recovery > 15*time.Second {
		t.Errorf("the service answered again %v after the promotion, want within 15 s", recovery)
	}
	after := count()
	eventually(t, 30*time.Second, "50 more orders placed after the failover", func() (bool, string) {
		return count() >= after+50, strconv.Itoa(count() - after)
	})
	close(stop)
	workers.Wait()

	// Timers claimed from the dead master's partitions just before it died
	// run again when their lease (30 s) ends; a call that was under way
	// when the master died can take up to the call timeout (25 s) to fail,
	// and is retried 3 s later: hence the bound.
	eventually(t, cfg.expiry+60*time.Second+fireMargin, "every timer has run", func() (bool, string) {
		active, detail := activeTimers(c, servers[0].base)
		return active == 0, detail
	})
	var confirmed, expired, unknown int
	for i, p := range orders {
		status, o := getOrder(c, servers[i%2].base, p.id)
		switch {
		case status == http.StatusNotFound && p.confirm != http.StatusOK:
			expired++
		case status == http.StatusOK && o.Confirmed && p.confirm != 0:
			confirmed++
			if p.confirm == -1 {
				unknown++
			}
		default:
			t.Errorf("order %s (confirm %d): %d %+v, want it expired (404), or confirmed if a confirm was sent",
				p.id, p.confirm, status, o)
		}
	}
	t.Logf("%d orders: %d confirmed (%d of them with a confirm that got no answer), %d expired; %d requests failed during the failover",
		len(orders), confirmed, unknown, expired, failed.Load())
	fired := firedAcross(t, c, servers, 0)
	t.Logf("timer calls by result across both instances: %v (at least once: a call whose outcome the failover cut off runs again)", fired)
}
