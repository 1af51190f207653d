package ordering_test

// End-to-end tests of the order sample: the real server binary (cmd/server),
// real HTTP, real Redis (TRELLIS_TEST_REDIS_URL, one database per test), and
// the wall clock. Expiries are short (2–3 s) so that the suite stays well
// under two minutes; every wait is a bounded poll on something the server
// shows, never a bare sleep.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/ordering"
)

// fireMargin bounds how late after its due time an expiry may be seen. A
// timer fires within milliseconds of its due time; the margin is for a
// loaded CI machine running every package's tests at once.
const fireMargin = 15 * time.Second

// place posts an order to base and checks the 201: a fresh UUID, the order
// placed and unconfirmed with what was asked, and its Location.
func place(t *testing.T, c *client, base, item string, quantity int) contract.Order {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"item": item, "quantity": quantity})
	r := c.do(http.MethodPost, base+"/orders", string(body))
	if r == nil || r.status != http.StatusCreated {
		t.Fatalf("POST /orders: %v, want 201", r)
	}
	var o contract.Order
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatalf("POST /orders: body %s: %v", r.body, err)
	}
	if _, err := uuid.Parse(o.Id); err != nil || len(o.Id) != 36 {
		t.Fatalf("POST /orders: id %q is not a UUID", o.Id)
	}
	want := contract.Order{Id: o.Id, Placed: true, Item: item, Quantity: quantity}
	if o != want {
		t.Fatalf("POST /orders: %+v, want %+v", o, want)
	}
	if loc := r.header.Get("Location"); loc != "/orders/"+o.Id {
		t.Fatalf("POST /orders: Location %q, want /orders/%s", loc, o.Id)
	}
	return o
}

// getOrder reads an order: the status, and the order on a 200.
func getOrder(c *client, base, id string) (int, contract.Order) {
	r := c.do(http.MethodGet, base+"/orders/"+id, "")
	if r == nil {
		return 0, contract.Order{}
	}
	var o contract.Order
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &o); err != nil {
			c.t.Errorf("GET /orders/%s: body %s: %v", id, r.body, err)
		}
	}
	return r.status, o
}

// adminTimer is the part of the admin API's timer that the tests read.
type adminTimer struct {
	Name        string          `json:"name"`
	ComponentID string          `json:"componentId"`
	Method      string          `json:"method"`
	Payload     json.RawMessage `json:"payload"`
}

func (tm adminTimer) String() string {
	return fmt.Sprintf("{name %s, call %s.%s(%s)}", tm.Name, tm.ComponentID, tm.Method, tm.Payload)
}

// timerStatus asks the admin API for the timer of order id: 200 with the
// timer, or 404. A 404 must be the admin API's "no such timer", not a
// missing route, so that a server without the admin API cannot pass.
func timerStatus(c *client, base, id string) (int, adminTimer) {
	name := ordering.TimerName(id)
	r := c.do(http.MethodGet, base+"/admin/timers/"+name, "")
	var tm adminTimer
	switch {
	case r == nil:
		return 0, tm
	case r.status == http.StatusOK:
		if err := json.Unmarshal(r.body, &tm); err != nil {
			c.t.Errorf("GET /admin/timers/%s: body %s: %v", name, r.body, err)
		}
	case r.status == http.StatusNotFound && strings.Contains(string(r.body), "no route"):
		c.t.Errorf("GET /admin/timers/%s: %v: the server has no admin API", name, r)
		return 0, tm
	}
	return r.status, tm
}

// wantTimer checks that order id's expiry timer is stored, calling
// order-timed-action.expireOrder with the id.
func wantTimer(t *testing.T, c *client, base, id string) {
	t.Helper()
	status, tm := timerStatus(c, base, id)
	wantPayload, _ := json.Marshal(id)
	if status != http.StatusOK || tm.Name != ordering.TimerName(id) || tm.ComponentID != "order-timed-action" ||
		tm.Method != "expireOrder" || !bytes.Equal(tm.Payload, wantPayload) {
		t.Fatalf("timer of order %s: %d %v, want 200 with a call of order-timed-action.expireOrder(%s)", id, status, tm, wantPayload)
	}
}

// activeTimers is the admin API's count of stored timers.
func activeTimers(c *client, base string) (int, string) {
	r := c.do(http.MethodGet, base+"/admin/timers/stats", "")
	if r == nil || r.status != http.StatusOK {
		return -1, r.String()
	}
	var st struct {
		Active *int `json:"active"`
	}
	if err := json.Unmarshal(r.body, &st); err != nil || st.Active == nil {
		return -1, r.String()
	}
	return *st.Active, r.String()
}

// problemFields checks that r is a problem+json with status and returns
// its detail and the fields it names.
func problemFields(t *testing.T, r *response, status int) (string, []string) {
	t.Helper()
	if r == nil || r.status != status || r.header.Get("Content-Type") != api.ContentTypeProblem {
		t.Fatalf("%v (Content-Type %q), want a %d problem", r, headerOf(r, "Content-Type"), status)
	}
	var p api.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem %s: %v", r.body, err)
	}
	var fields []string
	for _, f := range p.Errors {
		fields = append(fields, f.Field)
	}
	return p.Detail, fields
}

func headerOf(r *response, name string) string {
	if r == nil {
		return ""
	}
	return r.header.Get(name)
}

// An order that is not confirmed is gone after the expiry, through its
// timer: before, it is placed and its timer is stored; after, GET and
// confirm are 404 and the admin API no longer has the timer. Never early.
func TestE2EExpiry(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, 2*time.Second)
	s := startServer(t, cfg)
	c := newClient(t, cfg.adminToken)

	sent := time.Now()
	o := place(t, c, s.base, "Pizza Margherita", 1)
	if status, got := getOrder(c, s.base, o.Id); status != http.StatusOK || got != o {
		t.Fatalf("GET the new order: %d %+v, want 200 %+v", status, got, o)
	}
	wantTimer(t, c, s.base, o.Id)

	// Fails when the timer never fires: the order would stay placed.
	eventually(t, cfg.expiry+fireMargin, "the unconfirmed order expires", func() (bool, string) {
		status, got := getOrder(c, s.base, o.Id)
		return status == http.StatusNotFound, fmt.Sprintf("%d %+v", status, got)
	})
	if elapsed := time.Since(sent); elapsed < cfg.expiry {
		t.Errorf("the order was gone %v after it was placed, before its expiry of %v", elapsed, cfg.expiry)
	}
	detail, _ := problemFields(t, c.do(http.MethodPost, s.base+"/orders/"+o.Id+"/confirm", ""), http.StatusNotFound)
	if want := "No order found for " + o.Id; detail != want {
		t.Errorf("confirm after expiry: detail %q, want %q", detail, want)
	}
	// The call's success is recorded just after the call, so the timer
	// may outlive the order by a moment.
	eventually(t, 5*time.Second, "the expired order's timer is removed", func() (bool, string) {
		status, tm := timerStatus(c, s.base, o.Id)
		return status == http.StatusNotFound, fmt.Sprintf("%d %v", status, tm)
	})
}

// A confirmed order's timer is deleted at once, and the order is still
// confirmed after its expiry time has passed.
func TestE2EConfirmedOrderStays(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, 2*time.Second)
	s := startServer(t, cfg)
	c := newClient(t, cfg.adminToken)

	o := place(t, c, s.base, "Pizza Diavola", 2)
	wantTimer(t, c, s.base, o.Id)
	r := c.do(http.MethodPost, s.base+"/orders/"+o.Id+"/confirm", "")
	var confirmed contract.Order
	if r == nil || r.status != http.StatusOK || json.Unmarshal(r.body, &confirmed) != nil || !confirmed.Confirmed || !confirmed.Placed {
		t.Fatalf("confirm: %v, want 200 with the confirmed order", r)
	}
	if status, tm := timerStatus(c, s.base, o.Id); status != http.StatusNotFound {
		t.Fatalf("the confirmed order's timer: %d %v, want 404 at once", status, tm)
	}

	// The wait is on real time: the server is another process on the wall
	// clock, which no fake clock reaches. Rather than sleep past the
	// expiry, wait for a witness: an order placed after the confirmation,
	// so its timer is due after the confirmed order's was. Once the
	// witness has expired, the confirmed order's expiry time has passed,
	// and the scheduler has run everything due by then.
	witness := place(t, c, s.base, "witness", 1)
	eventually(t, cfg.expiry+fireMargin, "the witness order expires", func() (bool, string) {
		status, got := getOrder(c, s.base, witness.Id)
		return status == http.StatusNotFound, fmt.Sprintf("%d %+v", status, got)
	})
	if status, got := getOrder(c, s.base, o.Id); status != http.StatusOK || got != confirmed {
		t.Fatalf("the confirmed order after its expiry: %d %+v, want 200 %+v", status, got, confirmed)
	}
}

// Cancel answers 200 in every business case and confirm is idempotent;
// both delete the order's timer.
func TestE2ECancelAndConfirm(t *testing.T) {
	t.Parallel()
	// Nothing expires during this test.
	cfg := newServerConfig(t, time.Hour)
	s := startServer(t, cfg)
	c := newClient(t, cfg.adminToken)

	tests := []struct {
		name          string                      // the case
		state         string                      // the order before: "none" (never placed), "placed" or "confirmed"
		cmd           string                      // the command posted: "cancel" or "confirm"
		wantStatus    int                         // the command's HTTP status
		wantOutcome   contract.OrderResultOutcome // cancel's outcome; "" for confirm
		wantMessage   string                      // cancel's message or confirm's problem detail; %s is the id
		wantGet       int                         // the status of GET /orders/{id} afterwards
		wantConfirmed bool                        // the order is confirmed afterwards (when it is there)
	}{
		{"cancel placed", "placed", "cancel", 200, contract.OutcomeOK, "", 404, false},
		{"cancel never placed", "none", "cancel", 200, contract.OutcomeNotFound, "No order found for %s", 404, false},
		{"cancel confirmed", "confirmed", "cancel", 200, contract.OutcomeInvalid, "Cannot cancel an already confirmed order", 200, true},
		{"confirm placed", "placed", "confirm", 200, "", "", 200, true},
		{"confirm twice", "confirmed", "confirm", 200, "", "", 200, true},
		{"confirm never placed", "none", "confirm", 404, "", "No order found for %s", 404, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := uuid.NewString()
			if tt.state != "none" {
				id = place(t, c, s.base, "Calzone", 3).Id
				wantTimer(t, c, s.base, id)
			}
			if tt.state == "confirmed" {
				if r := c.do(http.MethodPost, s.base+"/orders/"+id+"/confirm", ""); r == nil || r.status != http.StatusOK {
					t.Fatalf("first confirm: %v", r)
				}
			}
			r := c.do(http.MethodPost, s.base+"/orders/"+id+"/"+tt.cmd, "")
			wantMessage := strings.ReplaceAll(tt.wantMessage, "%s", id)
			switch {
			case r == nil:
				t.FailNow()
			case tt.cmd == "cancel":
				var res contract.OrderResult
				if r.status != tt.wantStatus || json.Unmarshal(r.body, &res) != nil ||
					res.Outcome != tt.wantOutcome || res.Message != wantMessage || res.Order.Id != id {
					t.Fatalf("cancel: %v, want %d with outcome %q, message %q", r, tt.wantStatus, tt.wantOutcome, wantMessage)
				}
			case tt.wantStatus == http.StatusOK:
				var o contract.Order
				if r.status != http.StatusOK || json.Unmarshal(r.body, &o) != nil || o.Id != id || !o.Confirmed {
					t.Fatalf("confirm: %v, want 200 with the confirmed order", r)
				}
			default:
				if detail, _ := problemFields(t, r, tt.wantStatus); detail != wantMessage {
					t.Fatalf("confirm: detail %q, want %q", detail, wantMessage)
				}
			}
			status, o := getOrder(c, s.base, id)
			if status != tt.wantGet || (status == http.StatusOK && o.Confirmed != tt.wantConfirmed) {
				t.Errorf("GET afterwards: %d %+v, want %d (confirmed %v)", status, o, tt.wantGet, tt.wantConfirmed)
			}
			// Whatever the outcome, no timer is left that could still cancel it.
			if status, tm := timerStatus(c, s.base, id); status != http.StatusNotFound {
				t.Errorf("timer afterwards: %d %v, want 404", status, tm)
			}
		})
	}

	// An id in upper case is the same order: one order has one id.
	o := place(t, c, s.base, "Focaccia", 1)
	if status, got := getOrder(c, s.base, strings.ToUpper(o.Id)); status != http.StatusOK || got != o {
		t.Errorf("GET with the id in upper case: %d %+v, want 200 %+v", status, got, o)
	}
}

// Every invalid request is a 400 problem naming the field, and places no
// order and creates no timer; the limits themselves are accepted.
func TestE2EValidation(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, time.Hour) // nothing expires during this test
	s := startServer(t, cfg)
	c := newClient(t, cfg.adminToken)
	id := place(t, c, s.base, "Margherita", 1).Id

	tests := []struct {
		name       string // the case
		method     string // the request's method
		path       string // the request's path
		body       string // the request's JSON body ("" for none)
		wantStatus int    // 400, or 201 for a value at a limit
		wantField  string // the field the problem names
	}{
		{"item missing", "POST", "/orders", `{"quantity":1}`, 400, "item"},
		{"item null", "POST", "/orders", `{"item":null,"quantity":1}`, 400, "item"},
		{"item empty", "POST", "/orders", `{"item":"","quantity":1}`, 400, "item"},
		{"item of 201 characters", "POST", "/orders", `{"item":"` + strings.Repeat("x", 201) + `","quantity":1}`, 400, "item"},
		{"item not a string", "POST", "/orders", `{"item":7,"quantity":1}`, 400, "item"},
		{"quantity missing", "POST", "/orders", `{"item":"x"}`, 400, "quantity"},
		{"quantity 0", "POST", "/orders", `{"item":"x","quantity":0}`, 400, "quantity"},
		{"quantity negative", "POST", "/orders", `{"item":"x","quantity":-1}`, 400, "quantity"},
		{"quantity 10001", "POST", "/orders", `{"item":"x","quantity":10001}`, 400, "quantity"},
		{"quantity a string", "POST", "/orders", `{"item":"x","quantity":"2"}`, 400, "quantity"},
		{"quantity not whole", "POST", "/orders", `{"item":"x","quantity":1.5}`, 400, "quantity"},
		{"unknown field", "POST", "/orders", `{"item":"x","quantity":1,"price":3}`, 400, "price"},
		{"field in the wrong case", "POST", "/orders", `{"Item":"x","quantity":1}`, 400, "Item"},
		{"malformed JSON", "POST", "/orders", `{"item":"x","quantity":`, 400, "quantity"},
		{"GET, id not a UUID", "GET", "/orders/not-a-uuid", "", 400, "id"},
		{"GET, id without hyphens", "GET", "/orders/" + strings.ReplaceAll(id, "-", ""), "", 400, "id"},
		{"GET, id in braces", "GET", "/orders/%7B" + id + "%7D", "", 400, "id"},
		{"confirm, id not a UUID", "POST", "/orders/42/confirm", "", 400, "id"},
		{"cancel, id not a UUID", "POST", "/orders/" + id + "x/cancel", "", 400, "id"},
		{"item of 200 characters", "POST", "/orders", `{"item":"` + strings.Repeat("é", 200) + `","quantity":1}`, 201, ""},
		{"quantity 10000", "POST", "/orders", `{"item":"x","quantity":10000}`, 201, ""},
	}
	before, detail := activeTimers(c, s.base)
	if before != 1 {
		t.Fatalf("active timers: %d (%s), want 1", before, detail)
	}
	accepted := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.do(tt.method, s.base+tt.path, tt.body)
			if tt.wantStatus == http.StatusCreated {
				if r == nil || r.status != http.StatusCreated {
					t.Fatalf("%v, want 201", r)
				}
				accepted++
				return
			}
			_, fields := problemFields(t, r, tt.wantStatus)
			if !slices.Contains(fields, tt.wantField) {
				t.Fatalf("fields %q, want %s among them: %v", fields, tt.wantField, r)
			}
		})
	}
	// A refused order created no timer (the timer comes before the order,
	// so this shows validation comes before both).
	if after, detail := activeTimers(c, s.base); after != before+accepted {
		t.Errorf("active timers: %d (%s), want %d", after, detail, before+accepted)
	}
}

// Orders placed just before a kill -9 all expire on the next server on the
// same Redis: timers are durable, and none is left placed.
func TestE2EDurabilityKill9(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, 3*time.Second)
	s1 := startServer(t, cfg)
	c := newClient(t, cfg.adminToken)

	const n = 200
	ids := make([]string, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				r := c.do(http.MethodPost, s1.base+"/orders", `{"item":"durable","quantity":1}`)
				var o contract.Order
				if r == nil || r.status != http.StatusCreated || json.Unmarshal(r.body, &o) != nil {
					t.Errorf("POST /orders: %v", r)
					continue
				}
				ids[i] = o.Id
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Killed while the timers are pending (placing 200 orders takes well
	// under the 3 s expiry): the crash must not lose them.
	pending, detail := activeTimers(c, s1.base)
	if pending <= 0 {
		t.Fatalf("active timers before the kill: %d (%s); the orders expired before the kill, so this tests nothing", pending, detail)
	}
	t.Logf("%d of %d timers pending at the kill", pending, n)
	s1.kill9()

	s2 := startServer(t, cfg)
	// Timers the killed instance had claimed run again only when their
	// lease ends (30 s), hence the lease in the bound.
	eventually(t, cfg.expiry+30*time.Second+fireMargin, "every timer has run after the restart", func() (bool, string) {
		active, detail := activeTimers(c, s2.base)
		return active == 0, detail
	})
	var left []string // orders still there: reported by count, not one by one
	for _, id := range ids {
		if status, _ := getOrder(c, s2.base, id); status != http.StatusNotFound {
			left = append(left, fmt.Sprintf("%s (%d)", id, status))
		}
	}
	if len(left) > 0 {
		t.Errorf("%d of %d orders did not expire after the restart (GET not 404), e.g. %s", len(left), n, left[0])
	}
}

// Two instances on one Redis, requests alternating between them, give the
// results one instance would, and every expiry runs exactly once across
// both.
func TestE2ETwoInstances(t *testing.T) {
	t.Parallel()
	// Each order is confirmed or left to expire right after it is placed,
	// so its expiry must only outlast a few requests, even on a loaded machine.
	cfg := newServerConfig(t, 3*time.Second)
	servers := []*server{startServer(t, cfg), startServer(t, cfg)}
	c := newClient(t, cfg.adminToken)

	const n = 24
	type order struct {
		contract.Order
		on, other *server // where it was placed, and the other instance
	}
	orders := make([]order, n)
	expiring := 0
	for i := range orders {
		on, other := servers[i%2], servers[(i+1)%2]
		o := order{Order: place(t, c, on.base, "shared-"+strconv.Itoa(i), i+1), on: on, other: other}
		// The other instance sees it, and now holds it in memory.
		if status, got := getOrder(c, other.base, o.Id); status != http.StatusOK || got != o.Order {
			t.Fatalf("order %d on the other instance: %d %+v, want 200 %+v", i, status, got, o.Order)
		}
		switch i % 4 {
		case 0:
			// Confirmed on one instance, then cancelled on the other, whose
			// copy in memory is stale: it must see the confirmation.
			if r := c.do(http.MethodPost, o.on.base+"/orders/"+o.Id+"/confirm", ""); r == nil || r.status != http.StatusOK {
				t.Fatalf("confirm %d: %v", i, r)
			}
			var res contract.OrderResult
			r := c.do(http.MethodPost, o.other.base+"/orders/"+o.Id+"/cancel", "")
			if r == nil || json.Unmarshal(r.body, &res) != nil || res.Outcome != contract.OutcomeInvalid {
				t.Fatalf("cancel %d on the other instance after confirming: %v, want outcome invalid", i, r)
			}
			o.Confirmed = true
		case 1:
			if r := c.do(http.MethodPost, o.other.base+"/orders/"+o.Id+"/confirm", ""); r == nil || r.status != http.StatusOK {
				t.Fatalf("confirm %d on the other instance: %v", i, r)
			}
			o.Confirmed = true
		default:
			expiring++
		}
		orders[i] = o
	}

	eventually(t, cfg.expiry+fireMargin, "every timer has run", func() (bool, string) {
		active, detail := activeTimers(c, servers[0].base)
		return active == 0, detail
	})
	for i, o := range orders {
		for _, s := range servers {
			status, got := getOrder(c, s.base, o.Id)
			switch {
			case o.Confirmed && (status != http.StatusOK || got != o.Order):
				t.Fatalf("confirmed order %d on %s: %d %+v, want 200 %+v", i, s.base, status, got, o.Order)
			case !o.Confirmed && status != http.StatusNotFound:
				t.Fatalf("unconfirmed order %d on %s: %d %+v, want 404 (expired)", i, s.base, status, got)
			}
		}
	}
	// Each expiry ran once: the timer calls of both instances add up to
	// the timers that were left to expire, all of them successes. The
	// counters are bumped as the outcomes are recorded, hence the poll.
	var fired map[string]float64
	eventually(t, 5*time.Second, "the fired counters add up", func() (bool, string) {
		fired = map[string]float64{}
		for _, s := range servers {
			for result, v := range firedTotals(t, c, s.base) {
				fired[result] += v
			}
		}
		return fired["success"] >= float64(expiring), fmt.Sprint(fired)
	})
	want := map[string]float64{"success": float64(expiring)}
	for result, v := range fired {
		if v != want[result] {
			t.Errorf("timer calls by result across both instances: %v, want %v", fired, want)
			break
		}
	}
}

// Two servers on one Redis database with different TRELLIS_REDIS_PREFIX
// values are two services: neither sees the other's orders or timers, each
// runs only its own expiry, and their keys are under their own prefixes.
func TestE2ETwoPrefixes(t *testing.T) {
	t.Parallel()
	prefixes := []string{"e2e-shop-a", "e2e-shop-b"}
	dbURL := redisDB(t, prefixes...)
	token := "e2e-admin-" + rand.Text()
	const expiry = 2 * time.Second
	servers := make([]*server, len(prefixes))
	for i, p := range prefixes {
		servers[i] = startServer(t, serverConfig{redisURL: dbURL, expiry: expiry, adminToken: token, prefix: p})
	}
	c := newClient(t, token)

	orders := []contract.Order{place(t, c, servers[0].base, "prefix-a", 1), place(t, c, servers[1].base, "prefix-b", 2)}
	for i, s := range servers {
		own, other := orders[i], orders[1-i]
		if status, got := getOrder(c, s.base, own.Id); status != http.StatusOK || got != own {
			t.Fatalf("own order on %s (prefix %s): %d %+v, want 200 %+v", s.base, prefixes[i], status, got, own)
		}
		wantTimer(t, c, s.base, own.Id)
		if status, got := getOrder(c, s.base, other.Id); status != http.StatusNotFound {
			t.Errorf("the other prefix's order on %s (prefix %s): %d %+v, want 404", s.base, prefixes[i], status, got)
		}
		if status, tm := timerStatus(c, s.base, other.Id); status != http.StatusNotFound {
			t.Errorf("the other prefix's timer on %s (prefix %s): %d %v, want 404", s.base, prefixes[i], status, tm)
		}
		if active, detail := activeTimers(c, s.base); active != 1 {
			t.Errorf("active timers on %s (prefix %s): %s, want 1 (its own order's)", s.base, prefixes[i], detail)
		}
	}

	// The keys are where the prefixes say, and none under the default one:
	// a server that ignored its prefix would fail here even had it failed
	// nothing above.
	for _, p := range append([]string{defaultPrefix}, prefixes...) {
		keys := keysAt(t, dbURL, p)
		if wantSome := p != defaultPrefix; (len(keys) > 0) != wantSome {
			t.Errorf("keys under %s: %q, want some: %v", p, keys, wantSome)
		}
	}

	// Each expiry runs on the server of its prefix: one success each. With
	// one shared store, either server could have run both.
	for i, s := range servers {
		eventually(t, expiry+fireMargin, "the timer on "+prefixes[i]+" has run", func() (bool, string) {
			active, detail := activeTimers(c, s.base)
			return active == 0, detail
		})
		if status, got := getOrder(c, s.base, orders[i].Id); status != http.StatusNotFound {
			t.Errorf("order on %s (prefix %s) after its expiry: %d %+v, want 404", s.base, prefixes[i], status, got)
		}
	}
	for i, s := range servers {
		var fired map[string]float64
		eventually(t, 5*time.Second, "the fired counter of "+prefixes[i]+" is bumped", func() (bool, string) {
			fired = firedTotals(t, c, s.base)
			return fired["success"] >= 1, fmt.Sprint(fired)
		})
		if len(fired) != 1 || fired["success"] != 1 {
			t.Errorf("timer calls by result on %s (prefix %s): %v, want only success 1", s.base, prefixes[i], fired)
		}
	}
}

// firedTotals reads trellis_timers_fired_total by result from a server's
// /metrics (the Prometheus text format).
func firedTotals(t *testing.T, c *client, base string) map[string]float64 {
	t.Helper()
	r := c.do(http.MethodGet, base+"/metrics", "")
	if r == nil || r.status != http.StatusOK {
		t.Fatalf("GET /metrics: %v", r)
	}
	const prefix = `trellis_timers_fired_total{result="`
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		result, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			t.Fatalf("/metrics: cannot read %q", sc.Text())
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", sc.Text(), err)
		}
		out[result] = v
	}
	return out
}
