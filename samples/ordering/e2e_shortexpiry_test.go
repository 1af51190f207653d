package ordering_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/contract"
)

// With a 1 ms expiry, timers fire while their orders are being stored,
// often before: however the two interleave, on two instances of one Redis,
// every order ends expired, every timer has run, and no order record is
// left (a mark written by an early expiry is removed by the placement that
// follows it).
func TestE2EShortExpiryLeavesNoPlacedOrder(t *testing.T) {
	t.Parallel()
	const (
		orders  = 600 // placed in all
		workers = 16  // placing at once, alternating between the instances
	)
	cfg := newServerConfig(t, time.Millisecond)
	servers := []*server{startServer(t, cfg), startServer(t, cfg)}
	c := newClient(t, cfg.adminToken)

	ids := make(chan string, orders)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < orders; i += workers {
				s := servers[i%len(servers)]
				r := c.do(http.MethodPost, s.base+"/orders", `{"item": "short", "quantity": 1}`)
				var o contract.Order
				if r == nil || r.status != http.StatusCreated || json.Unmarshal(r.body, &o) != nil || !o.Placed {
					t.Errorf("POST /orders on %s: %v, want 201 with the order placed", s.base, r)
					continue
				}
				ids <- o.Id
			}
		})
	}
	wg.Wait()
	close(ids)
	if t.Failed() {
		t.FailNow()
	}

	eventually(t, fireMargin, "every timer has run", func() (bool, string) {
		active, detail := activeTimers(c, servers[0].base)
		return active == 0, detail
	})
	placed := 0
	for id := range ids {
		if status, o := getOrder(c, servers[0].base, id); status != http.StatusNotFound {
			placed++
			t.Errorf("order %s after its timer ran: %d %+v, want 404", id, status, o)
		}
	}
	if placed > 0 {
		t.Fatalf("%d of %d orders stay placed with no timer to expire them", placed, orders)
	}

	docs := documentsAt(t, cfg.redisURL, defaultPrefix+":entity:5:order")
	if len(docs) > 0 {
		t.Errorf("%d order records left after every order expired, such as %s", len(docs), docs[0])
	}
}
