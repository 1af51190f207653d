package ordering_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/trellistest"
)

// TestCustomerOrders: a customer's orders of one status, newest first,
// paged by token through GET /customers/{customer}/orders; an order just
// placed or confirmed is listed when the list waits for its change
// position; bad input is a 400 naming the parameter.
func TestCustomerOrders(t *testing.T) {
	var notices *ordering.Notices
	ts := trellistest.Start(t, orderApp(time.Hour, &notices))
	var ids []string // alice's, oldest first
	var positions []string
	for i := range 7 {
		customer := "alice"
		if i%3 == 2 {
			customer = "bob"
		}
		resp := ts.Post(t, "/orders", map[string]any{"item": fmt.Sprintf("tea %d", i), "quantity": 1, "customer": customer})
		if resp.Status != http.StatusCreated {
			t.Fatalf("POST /orders: %d %s", resp.Status, resp.Body)
		}
		var o contract.Order
		resp.JSON(t, &o)
		if customer == "alice" {
			ids = append(ids, o.Id)
		}
		positions = append(positions, resp.Header.Get("Trellis-Change-Position"))
		ts.Clock.Advance(time.Millisecond) // placedAt is in milliseconds: newest first is then well defined
	}
	resp := ts.Post(t, "/orders/"+ids[1]+"/confirm", nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("confirm: %d %s", resp.Status, resp.Body)
	}
	list := func(query url.Values) contract.OrderPage {
		t.Helper()
		resp := ts.Get(t, "/customers/alice/orders?"+query.Encode())
		if resp.Status != http.StatusOK {
			t.Fatalf("list %v: %d %s", query, resp.Status, resp.Body)
		}
		var p contract.OrderPage
		resp.JSON(t, &p)
		return p
	}
	// A position covers its own shard's log only: wait for every
	// placing's (the orders fall in several shards). The confirmation's
	// position is not in its reply: wait for it by asking for confirmed
	// orders.
	for _, pos := range positions {
		list(url.Values{"limit": {"1"}, "after": {pos}})
	}
	var got []string
	q := url.Values{"limit": {"2"}}
	for {
		p := list(q)
		for _, o := range p.Orders {
			got = append(got, o.Id)
		}
		if p.Next == "" {
			break
		}
		q = url.Values{"limit": {"2"}, "pageToken": {p.Next}}
	}
	want := []string{ids[4], ids[3], ids[2], ids[0]} // newest first, ids[1] confirmed
	if !slices.Equal(got, want) && !slices.Equal(got, append(want[:3:3], ids[1], ids[0])) {
		t.Fatalf("alice's placed orders %v, want %v", got, want)
	}
	trellistest.Eventually(t, 10*time.Second, "the confirmed order listed", func() bool {
		p := list(url.Values{"status": {"confirmed"}})
		return len(p.Orders) == 1 && p.Orders[0].Id == ids[1] && p.Orders[0].Confirmed
	})
	for _, tc := range []struct{ query, field string }{
		{"pageToken=bogus", "pageToken"},
		{"limit=101", "limit"},
		{"limit=ten", "limit"},
		{"status=lost", "status"},
		{"after=nowhere", "after"},
		{"pageToken=" + forged(t, list(url.Values{"limit": {"1"}}).Next), "pageToken"},
		{"stream status=lost", "status"},
	} {
		path := "/customers/alice/orders?" + tc.query
		if q, ok := strings.CutPrefix(tc.query, "stream "); ok {
			path = "/customers/alice/orders/stream?" + q
		}
		resp := ts.Get(t, path)
		if resp.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.query, resp.Status, resp.Body)
			continue
		}
		if p := resp.Problem(t); len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
			t.Errorf("%s: %+v, want a problem naming %s", tc.query, p, tc.field)
		}
	}
}

// forged is a page token with one bit of its payload flipped: a client
// that edits a token gets it refused.
func forged(t *testing.T, token string) string {
	t.Helper()
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(data) < 2 {
		t.Fatalf("the token %q is not base64url: %v", token, err)
	}
	data[0] ^= 1
	return base64.RawURLEncoding.EncodeToString(data)
}
