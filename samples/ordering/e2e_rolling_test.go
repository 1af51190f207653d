package ordering_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/contract"
)

// TestE2EClusterRollingUpdate: the order sample on three instances,
// rolled as the Kubernetes Deployment of deploy/kubernetes rolls its pods
// (maxSurge 1, maxUnavailable 0) while orders are placed and every third
// one confirmed through the ready instances: for each old instance in
// turn a new one is started and polled on /readyz until 200, and once the
// shards are served among the live ones the old one is taken out of the
// balancer (after the request in flight to it) and sent SIGTERM, which
// must end it with exit code 0. No request fails; every confirmed order
// stays confirmed and every other one expires, and no timer is left.
func TestE2EClusterRollingUpdate(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, 4*time.Second)
	cfg.secret, cfg.lease = "e2e-roll-"+fmt.Sprint(rand.Uint64())+"-0123456789abcdef", 2*time.Second
	old := []*server{startServer(t, cfg), startServer(t, cfg), startServer(t, cfg)}
	c := newClient(t, cfg.adminToken)
	settled(t, c, old)

	// The balancer: the placer holds mu for each request, so taking an
	// instance out waits for the request in flight to it, as the pod's
	// removal from the endpoints and its preStop pause do.
	var (
		mu       sync.Mutex
		ready    = slices.Clone(old)
		orders   []contract.Order
		failures []string
		stop     atomic.Bool
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
		for i := 0; !stop.Load(); i++ {
			mu.Lock()
			base := ready[rng.IntN(len(ready))].base
			r := c.try(http.MethodPost, base+"/orders", fmt.Sprintf(`{"item": "roll-%d", "quantity": 1}`, i))
			var o contract.Order
			switch {
			case r == nil || r.status != http.StatusCreated:
				failures = append(failures, fmt.Sprintf("place %d on %s: %v", i, base, r))
			case json.Unmarshal(r.body, &o) != nil:
				failures = append(failures, fmt.Sprintf("place %d: body %s", i, r.body))
			case i%3 == 0:
				base = ready[rng.IntN(len(ready))].base
				if r := c.try(http.MethodPost, base+"/orders/"+o.Id+"/confirm", ""); r == nil || r.status != http.StatusOK {
					failures = append(failures, fmt.Sprintf("confirm %d on %s: %v", i, base, r))
				} else {
					o.Confirmed = true
				}
			}
			if o.Id != "" {
				orders = append(orders, o)
			}
			mu.Unlock()
		}
	}()

	live := slices.Clone(old)
	for i, o := range old {
		began := time.Now()
		n := startServer(t, cfg) // returns once /readyz answers 200
		live = append(live, n)
		settled(t, c, live)
		mu.Lock()
		ready = append(slices.DeleteFunc(ready, func(s *server) bool { return s == o }), n)
		mu.Unlock()
		o.stop()
		live = slices.DeleteFunc(live, func(s *server) bool { return s == o })
		settled(t, c, live)
		t.Logf("instance %d replaced in %v", i+1, time.Since(began).Round(time.Millisecond))
	}
	stop.Store(true)
	<-done

	for _, f := range failures[:min(len(failures), 5)] {
		t.Errorf("failed during the roll: %s", f)
	}
	if len(failures) > 0 || len(orders) < 10 {
		t.Fatalf("%d requests failed, %d orders placed", len(failures), len(orders))
	}
	eventually(t, cfg.expiry+fireMargin, "every timer has run", func() (bool, string) {
		active, detail := activeTimers(c, live[0].base)
		return active == 0, detail
	})
	for i, o := range orders {
		status, body := getOrder(c, live[i%len(live)].base, o.Id)
		switch {
		case o.Confirmed && (status != http.StatusOK || !body.Confirmed):
			t.Errorf("confirmed order %d: %d %+v, want 200 confirmed", i, status, body)
		case !o.Confirmed && status != http.StatusNotFound:
			t.Errorf("unconfirmed order %d: %d %+v, want 404 (expired)", i, status, body)
		}
	}
	t.Logf("%d orders placed during the roll, none failed", len(orders))
}

// settled waits until the instances serve every shard between them.
func settled(t *testing.T, c *client, servers []*server) {
	t.Helper()
	eventually(t, time.Minute, "every shard served", func() (bool, string) {
		total := 0
		for _, s := range servers {
			r := c.try(http.MethodGet, s.base+"/metrics", "")
			if r == nil || r.status != http.StatusOK {
				return false, s.base + ": " + r.String()
			}
			for line := range strings.Lines(string(r.body)) {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "trellis_cluster_shards_served "); ok {
					n, _ := strconv.ParseFloat(v, 64)
					total += int(n)
				}
			}
		}
		return total == 256, fmt.Sprint(total, " shards served")
	})
}
