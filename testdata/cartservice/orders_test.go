package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

// TestOrdersView pages through a customer's orders, newest first, and
// through the orders of a status, oldest first: each order once, in
// order, the last page's next token empty.
func TestOrdersView(t *testing.T) {
	ts := start(t)
	var want []string // alice's orders, newest first
	for i := range 5 {
		id := fmt.Sprintf("o-%d", i)
		post(t, ts, "/orders/"+id, map[string]any{"customer": "alice"}, http.StatusCreated)
		want = append([]string{id}, want...)
		settle(t, ts, id)             // cancelled: no such cart
		ts.Clock.Advance(time.Second) // no step runs: a date of its own for each order
	}
	post(t, ts, "/orders/bob-1", map[string]any{"customer": "bob"}, http.StatusCreated)
	settle(t, ts, "bob-1")
	trellistest.Eventually(t, 10*time.Second, "the view shows the orders cancelled", func() bool {
		return len(pages(t, ts, "/orders?status=cancelled&limit=100")) == 6
	})

	if got := pages(t, ts, "/customers/alice/orders?limit=2"); !slices.Equal(got, want) {
		t.Errorf("alice's orders, 2 a page: %v, want %v", got, want)
	}
	oldest := append(slices.Clone(want), "bob-1")
	slices.Reverse(oldest[:5])
	if got := pages(t, ts, "/orders?status=cancelled&limit=4"); !slices.Equal(got, oldest) {
		t.Errorf("the cancelled orders, 4 a page: %v, want %v", got, oldest)
	}
	if got := pages(t, ts, "/customers/carol/orders"); len(got) != 0 {
		t.Errorf("carol's orders: %v, want none", got)
	}
}

// pages reads every page of path (a list of orders) and returns the ids,
// in order: the first page, then each next one while its token is not
// empty.
func pages(t testing.TB, ts *trellistest.Service, path string) []string {
	t.Helper()
	var ids []string
	for token := ""; ; {
		p := path
		if token != "" {
			p += "&token=" + token
		}
		resp := ts.Get(t, p)
		if resp.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, resp.Status, resp.Body)
		}
		var page cartapi.OrderPage
		resp.JSON(t, &page)
		for _, o := range page.Orders {
			ids = append(ids, o.Id)
		}
		if token = page.Next; token == "" {
			return ids
		}
	}
}

// TestFollowOrders follows a customer's orders live, from Go: the rows
// first, then an order that enters the list and its change of status.
func TestFollowOrders(t *testing.T) {
	ts := start(t)
	post(t, ts, "/orders/o-1", map[string]any{"customer": "alice"}, http.StatusCreated)
	settle(t, ts, "o-1")
	trellistest.Eventually(t, 10*time.Second, "the view shows o-1 cancelled", func() bool {
		o := pages(t, ts, "/orders?status=cancelled")
		return len(o) == 1
	})

	ctx, cancel := context.WithCancel(context.Background())
	f, err := ts.Host().Views().Follow(ctx, Orders.Name(), ByCustomer.Name(), views.Request{Params: map[string]string{"customer": "alice"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan views.Event, 100)
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, func(batch []views.Event) error {
			for _, e := range batch {
				if e.Kind != "" { // "": a newer cursor alone
					events <- e
				}
			}
			return nil
		})
	}()
	defer func() {
		cancel()
		if err := trellistest.Recv(t, done, 10*time.Second); err != nil {
			t.Errorf("follow: %v", err)
		}
	}()

	next := func(kind, id string) OrderRow {
		t.Helper()
		e := trellistest.Recv(t, events, 10*time.Second)
		var row OrderRow
		if e.Row != nil {
			if err := json.Unmarshal(e.Row, &row); err != nil {
				t.Fatal(err)
			}
		}
		if e.Kind != kind || e.EntityID != id {
			t.Fatalf("event %s %s (%s), want %s %s", e.Kind, e.EntityID, e.Row, kind, id)
		}
		return row
	}
	next("row", "o-1")
	next("ready", "")
	post(t, ts, "/orders/o-2", map[string]any{"customer": "alice"}, http.StatusCreated)
	post(t, ts, "/orders/o-3", map[string]any{"customer": "bob"}, http.StatusCreated)
	// o-2 enters the list, then changes until it is cancelled (no such
	// cart); bob's o-3 is not in it.
	for row := next("added", "o-2"); row.Status != StatusCancelled; {
		row = next("changed", "o-2")
	}
}

// TestFollowOrdersOverHTTP reads the start of a customer's stream, as an
// EventSource does, through the contract's check: the order's row, then
// ready.
func TestFollowOrdersOverHTTP(t *testing.T) {
	ts := start(t)
	post(t, ts, "/orders/o-1", map[string]any{"customer": "alice"}, http.StatusCreated)
	settle(t, ts, "o-1")
	trellistest.Eventually(t, 10*time.Second, "the view shows o-1", func() bool {
		return len(pages(t, ts, "/customers/alice/orders")) == 1
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/customers/alice/orders/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	const ended = "(the stream ended)"
	lines := make(chan string, 100)
	go func() {
		defer func() { lines <- ended }()
		resp, err := ts.HTTP.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	var got []string // the events, and the data of o-1
	for !slices.Contains(got, "event: ready") {
		switch line := trellistest.Recv(t, lines, 10*time.Second); {
		case line == ended:
			t.Fatalf("the stream ended after %q", got)
		case strings.HasPrefix(line, "event: "), strings.Contains(line, `"id":"o-1"`):
			got = append(got, line)
		}
	}
	if len(got) != 3 || got[0] != "event: row" || !strings.Contains(got[1], "cancelled") {
		t.Errorf("the stream began %q, want o-1's row (cancelled), then ready", got)
	}
}
