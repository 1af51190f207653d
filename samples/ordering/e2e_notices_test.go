package ordering_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/contract"
)

// TestE2ENoticesKill9: the real binary, two instances as one cluster on
// real Redis. Orders are placed, half confirmed one by one, then the
// other half all at once through the victim, which is killed with
// SIGKILL while those confirmations are in flight: some are stored and
// not yet handled by the consumer. Every order the survivor finds
// confirmed, once it has taken the victim's shards over (resuming from
// their checkpoints), gets its notice logged, by the victim before the
// kill or by the survivor; notices logged twice (replays) are counted.
func TestE2ENoticesKill9(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, 10*time.Minute) // nothing expires meanwhile
	cfg.secret, cfg.lease = "e2e-notices-"+fmt.Sprint(rand.Uint64())+"-0123456789abcdef", 2*time.Second
	survivor, victim := startServer(t, cfg), startServer(t, cfg)
	servers := []*server{survivor, victim}
	c := newClient(t, cfg.adminToken)

	const n = 40
	orders := make([]contract.Order, n)
	for i := range orders {
		orders[i] = place(t, c, survivor.base, fmt.Sprintf("notice-%d", i), i+1)
	}
	for _, o := range orders[:n/2] {
		if r := c.do(http.MethodPost, victim.base+"/orders/"+o.Id+"/confirm", ""); r == nil || r.status != http.StatusOK {
			t.Fatalf("confirm %s: %v", o.Id, r)
		}
	}
	// The kill comes as soon as the first of these is answered: the
	// others are on their way, some stored, some not.
	var wg sync.WaitGroup
	answered := make(chan struct{}, n)
	for _, o := range orders[n/2:] {
		wg.Go(func() {
			c.try(http.MethodPost, victim.base+"/orders/"+o.Id+"/confirm", "")
			answered <- struct{}{}
		})
	}
	<-answered
	victim.kill9()
	wg.Wait()

	// A read forwarded to the victim on a connection the kill broke
	// answers 504 (its outcome is unknown to the forwarder) and one sent
	// before the victim's lease lapsed may answer 503; a client retries a
	// GET on either, as this does, until the survivor owns the shards.
	var confirmed []string
	for _, o := range orders {
		var got contract.Order
		eventually(t, 10*cfg.lease, "GET /orders/"+o.Id+" on the survivor", func() (bool, string) {
			status, order := getOrder(c, survivor.base, o.Id)
			switch status {
			case http.StatusOK:
				got = order
				return true, ""
			case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
				return false, fmt.Sprint(status)
			}
			t.Fatalf("GET /orders/%s on the survivor: %d", o.Id, status)
			return false, ""
		})
		if got.Confirmed {
			confirmed = append(confirmed, o.Id)
		}
	}
	if len(confirmed) < n/2 {
		t.Fatalf("%d orders confirmed, want at least the %d confirmed before the kill", len(confirmed), n/2)
	}

	notices := func(id string) int {
		count := 0
		for _, s := range servers {
			for _, line := range s.logs.all() {
				if strings.Contains(line, `"msg":"order notice"`) && strings.Contains(line, `"order":"`+id+`"`) &&
					strings.Contains(line, `"kind":"confirmed"`) {
					count++
				}
			}
		}
		return count
	}
	eventually(t, 30*time.Second+cfg.lease, "every confirmed order's notice", func() (bool, string) {
		for _, id := range confirmed {
			if notices(id) == 0 {
				return false, "no notice yet for " + id
			}
		}
		return true, ""
	})
	replays := 0
	for _, id := range confirmed {
		k := notices(id)
		if k > 2 {
			t.Errorf("order %s: %d notices, want 1, or 2 after a replay", id, k)
		}
		replays += k - 1
	}
	t.Logf("%d orders confirmed, %d of them while the victim was killed: %d notices logged twice (a replay on the survivor)",
		len(confirmed), len(confirmed)-n/2, replays)
}
