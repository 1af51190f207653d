package ordering_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/contract"
)

// TestE2EClusterKill9: the order sample on three instances that form one
// cluster. Orders are placed and confirmed through random instances, and
// one instance is killed with SIGKILL in the middle: its shards are served
// again by the others after its lease, every confirmed order stays
// confirmed and every other one expires.
func TestE2EClusterKill9(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, 4*time.Second)
	cfg.secret, cfg.lease = "e2e-cluster-"+fmt.Sprint(rand.Uint64())+"-0123456789abcdef", 2*time.Second
	servers := []*server{startServer(t, cfg), startServer(t, cfg), startServer(t, cfg)}
	c := newClient(t, cfg.adminToken)

	const n = 60
	orders := make([]contract.Order, n)
	var (
		mu   sync.Mutex
		live = servers
	)
	anyLive := func(rng *rand.Rand) *server {
		mu.Lock()
		defer mu.Unlock()
		return live[rng.IntN(len(live))]
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var killedAt time.Time
	var slowest time.Duration // the longest placement after the kill
	for i := range orders {
		if i == n/2 {
			// The victim owns about a third of the shards, so of the
			// orders placed so far too.
			servers[0].kill9()
			killedAt = time.Now()
			mu.Lock()
			live = servers[1:]
			mu.Unlock()
		}
		began := time.Now()
		orders[i] = place(t, c, anyLive(rng).base, fmt.Sprintf("kill9-%d", i), i+1)
		if !killedAt.IsZero() {
			slowest = max(slowest, time.Since(began))
		}
		if i%3 == 0 {
			if r := c.do(http.MethodPost, anyLive(rng).base+"/orders/"+orders[i].Id+"/confirm", ""); r == nil || r.status != http.StatusOK {
				t.Fatalf("confirm %d: %v", i, r)
			}
			orders[i].Confirmed = true
		}
	}
	t.Logf("placed and confirmed every order; the last %d after the kill (lease %v), done %v after it; the slowest placement took %v",
		n/2, cfg.lease, time.Since(killedAt).Round(time.Millisecond), slowest.Round(time.Millisecond))

	// A timer the killed instance had claimed runs again when its claim's
	// lease ends (30 s), hence the lease in the bound.
	eventually(t, cfg.expiry+30*time.Second+fireMargin, "every timer has run", func() (bool, string) {
		active, detail := activeTimers(c, live[0].base)
		return active == 0, detail
	})
	for i, o := range orders {
		for _, s := range live {
			status, body := getOrder(c, s.base, o.Id)
			switch {
			case o.Confirmed && (status != http.StatusOK || !body.Confirmed):
				t.Errorf("confirmed order %d on %s: %d %+v, want 200 confirmed", i, s.base, status, body)
			case !o.Confirmed && status != http.StatusNotFound:
				raw, _ := json.Marshal(body)
				t.Errorf("unconfirmed order %d on %s: %d %s, want 404 (expired)", i, s.base, status, raw)
			}
		}
	}
}
