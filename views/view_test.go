package views_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/views"
)

// TestViewQueries: rows follow their entities' changes (an update moves
// a row in its indexes, a deletion and a cancellation remove it), and
// each query pages through exactly its rows in its order, read after the
// last write's position.
func TestViewQueries(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			ts := st.start(t)
			var positions []string
			for i := range 30 {
				positions = append(positions, put(t, ts, fmt.Sprintf("o-%02d", i), order{Customer: fmt.Sprintf("c%d", i%3), Status: []string{"open", "paid"}[i%2], Created: int64(1000 + i), Total: i * 10}))
			}
			positions = append(positions,
				put(t, ts, "o-00", order{Customer: "c0", Status: "paid", Created: 5000, Total: 7}), // moves
				remove(t, ts, "o-03"),
				put(t, ts, "o-06", order{Customer: "c0", Status: "cancelled", Created: 1006}))
			caughtUp(t, ts, positions[:len(positions)-1]...)

			got := pageAll(t, ts, byCustomer, views.Request{Params: map[string]string{"customer": "c0", "status": "paid"}, Limit: 2, After: positions[len(positions)-1], Wait: waitLong})
			want := []string{"o-00", "o-27", "o-21", "o-15", "o-09"}
			if ids := rowIDs(got); !slices.Equal(ids, want) {
				t.Errorf("by-customer c0 paid: %v, want %v", ids, want)
			}
			got = pageAll(t, ts, byTotal, views.Request{Min: "50", Max: "100", Limit: 3})
			want = []string{"o-05", "o-07", "o-08", "o-09"} // o-06 cancelled
			if ids := rowIDs(got); !slices.Equal(ids, want) {
				t.Errorf("by-total [50, 100): %v, want %v", ids, want)
			}
			got = pageAll(t, ts, all, views.Request{Limit: 7})
			if len(got) != 28 || !slices.IsSorted(rowIDs(got)) {
				t.Errorf("all: %d rows %v, want 28 in id order", len(got), rowIDs(got))
			}
		})
	}
}

func rowIDs(rows []orderRow) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// TestViewBadInput: each bad input is refused with its sentinel and a 400
// naming the parameter.
func TestViewBadInput(t *testing.T) {
	ts := stores[0].start(t)
	ok := map[string]string{"customer": "c0", "status": "open"}
	var positions []string
	for i := range 3 {
		positions = append(positions, put(t, ts, fmt.Sprintf("o-%d", i), order{Customer: "c0", Status: "open", Created: int64(i)}))
	}
	caughtUp(t, ts, positions...)
	first, err := byCustomer.Page(context.Background(), ts.Host().Views(), views.Request{Params: ok, Limit: 1})
	if err != nil || first.Next == "" {
		t.Fatalf("first page: %v, %+v", err, first)
	}
	other, err := all.Page(context.Background(), ts.Host().Views(), views.Request{Limit: 1})
	if err != nil || other.Next == "" {
		t.Fatalf("first page of all: %v, %+v", err, other)
	}
	for _, tc := range []struct {
		name  string
		query string
		req   views.Request
		want  error
		field string
	}{
		{"malformed token", "by-customer", views.Request{Params: ok, Token: "not-a-token"}, views.ErrBadToken, "token"},
		{"altered token", "by-customer", views.Request{Params: ok, Token: alter(first.Next)}, views.ErrBadToken, "token"},
		{"forged token", "by-customer", views.Request{Params: ok, Token: forge(t, first.Next)}, views.ErrBadToken, "token"},
		{"token of another query", "by-customer", views.Request{Params: ok, Token: other.Next}, views.ErrBadToken, "token"},
		{"token with other parameters", "by-customer", views.Request{Params: map[string]string{"customer": "c1", "status": "open"}, Token: first.Next}, views.ErrBadToken, "token"},
		{"limit over the maximum", "by-total", views.Request{Limit: 51}, views.ErrBadLimit, "limit"},
		{"negative limit", "all", views.Request{Limit: -1}, views.ErrBadLimit, "limit"},
		{"wrong type", "by-total", views.Request{Min: "ten"}, views.ErrBadParam, "min"},
		{"missing parameter", "by-customer", views.Request{Params: map[string]string{"customer": "c0"}}, views.ErrBadParam, "status"},
		{"unknown parameter", "all", views.Request{Params: map[string]string{"colour": "red"}}, views.ErrBadParam, "colour"},
		{"range on a query without one", "all", views.Request{Max: "3"}, views.ErrBadParam, "max"},
		{"unknown query", "by-colour", views.Request{}, views.ErrUnknownQuery, "query"},
		{"bad position", "all", views.Request{After: "300.1"}, views.ErrBadPosition, "after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ts.Host().Views().Page(context.Background(), "test-orders", tc.query, tc.req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var re *api.RequestError
			if !errors.As(err, &re) || re.Status != 400 || len(re.Fields) != 1 || re.Fields[0].Field != tc.field {
				t.Fatalf("err = %#v, want a 400 naming %s", err, tc.field)
			}
		})
	}
}

// TestViewStartRefusesBadQueries: a query over a field the row lacks or
// cannot index, or a range off its sort field, fails Start naming it.
func TestViewStartRefusesBadQueries(t *testing.T) {
	type row struct {
		Name string            `json:"name"`
		Tags map[string]string `json:"tags"`
		N    int               `json:"n"`
	}
	cases := []struct {
		name string
		opts []views.QueryOption
		want string
	}{
		{"no such field", []views.QueryOption{views.Eq("colour")}, `field "colour": the row has no such field`},
		{"unindexable", []views.QueryOption{views.SortBy("tags", views.Asc)}, `field "tags": its type map[string]string cannot be indexed`},
		{"range off the sort", []views.QueryOption{views.Range("n"), views.SortBy("name", views.Asc)}, `field "n": a range needs an index sorted by its field`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := views.Define("bad-"+strings.ReplaceAll(tc.name, " ", "-"), orders, func(views.Change[order]) views.Update[row] { return views.Ignore[row]() })
			v.Query("q", tc.opts...)
			r, err := views.NewRunner(views.Config{Store: views.NewMemoryStore(), NoLog: "none"})
			if err != nil {
				t.Fatal(err)
			}
			err = v.Start(r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want it to say %s", err, tc.want)
			}
		})
	}
}

// alter flips one bit of a token's payload.
func alter(token string) string {
	data, _ := base64.RawURLEncoding.DecodeString(token)
	data[len(data)/2] ^= 1
	return base64.RawURLEncoding.EncodeToString(data)
}

// forge makes a token as an attacker who knows its format would: the
// payload of a real one, its last key moved, with a MAC made up.
func forge(t *testing.T, token string) string {
	data, _ := base64.RawURLEncoding.DecodeString(token)
	payload := data[:len(data)-16]
	var fields map[string]any
	if err := json.Unmarshal(payload, &fields); err != nil {
		t.Fatalf("a token's payload is not JSON: %v", err)
	}
	fields["k"] = base64.StdEncoding.EncodeToString([]byte("zzz"))
	forged, _ := json.Marshal(fields)
	return base64.RawURLEncoding.EncodeToString(append(forged, make([]byte, 16)...))
}

// TestViewStreamBadInput: a bad parameter or Last-Event-ID of a stream is
// a 400 problem naming it, before the stream begins.
func TestViewStreamBadInput(t *testing.T) {
	ts := stores[0].start(t)
	for _, tc := range []struct {
		name, query, lastID, field string
	}{
		{"missing parameter", "customer=c0", "", "status"},
		{"malformed last event id", "customer=c0&status=open", "not-an-id", "Last-Event-ID"},
		{"altered last event id", "customer=c0&status=open", alter("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), "Last-Event-ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, ts.URL+"/orders/stream?"+tc.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.lastID != "" {
				req.Header.Set("Last-Event-ID", tc.lastID)
			}
			resp, err := ts.Send(req)
			if err != nil {
				t.Fatal(err)
			}
			p := resp.Problem(t)
			if resp.Status != http.StatusBadRequest || len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
				t.Fatalf("%d %+v, want a 400 naming %s", resp.Status, p, tc.field)
			}
		})
	}
}
