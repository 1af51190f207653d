package eventsourced_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/trellistest"
)

const adminToken = "event-sourced-admin-token"

// TestAdminAPI: the admin API shows an entity's journal head (seq,
// deleted, snapshot) and pages its events, behind the admin token.
func TestAdminAPI(t *testing.T) {
	ts := trellistest.Start(t, startWallets, trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = adminToken }))
	ctx := context.Background()
	for i := range 6 { // a snapshot at 5
		if _, err := Deposit.Invoke(ctx, ts.Client, "w-1", Deposited{Amount: i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	store := ts.Host().Store.(entities.JournalStore)
	bad := entities.JournalWrite{Events: []entities.JournalEvent{{Seq: 1, Name: "refunded", Data: []byte(`{}`)}}}
	if err := store.Append(ctx, entities.Fence{}, "wallet", "w-bad", bad); err != nil {
		t.Fatal(err)
	}
	get := func(path, token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := ts.Send(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status, strings.TrimSpace(string(resp.Body))
	}
	cases := []struct {
		path, token string
		status      int
		want        []string // in the body
	}{
		{"/admin/eventsourced/wallet/w-1", adminToken, 200, []string{`"seq":6`, `"deleted":false`, `"seq":5,"state":{"balance":15,`}},
		{"/admin/eventsourced/wallet/w-1/events?limit=4", adminToken, 200, []string{`"name":"deposited","seq":1}`, `"seq":4}`, `"next":4`}},
		{"/admin/eventsourced/wallet/w-1/events?after=4", adminToken, 200, []string{`"seq":5}`, `"seq":6}`}},
		{"/admin/eventsourced/wallet/w-9", adminToken, 200, []string{`"seq":0`}},
		{"/admin/eventsourced/wallet/w-bad", adminToken, 200, []string{`"seq":1`, `"loadError":"event 1 of wallet \"w-bad\": unknown event name \"refunded\"`}},
		{"/admin/eventsourced/wallet/w-1/events?limit=0", adminToken, 400, []string{"limit"}},
		{"/admin/eventsourced/wallet/w-1", "", 401, nil},
	}
	for _, c := range cases {
		status, body := get(c.path, c.token)
		if status != c.status {
			t.Fatalf("GET %s: %d %s; want %d", c.path, status, body, c.status)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Fatalf("GET %s: %s; want it to hold %s", c.path, body, w)
			}
		}
	}
	if _, body := get("/admin/eventsourced/wallet/w-1/events?after=4", "secret"); strings.Contains(body, `"next"`) {
		t.Fatalf("the last page has a next: %s", body)
	}
}
