package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// timerPath is the path of the timer called name, escaped.
func timerPath(name string) string { return "/admin/timers/" + url.PathEscape(name) }

// listAll walks GET /admin/timers?query to its end, following nextCursor,
// and returns every timer listed and the number of pages. It fails the
// test on an error, on a page larger than limit (when limit > 0), and on a
// walk that does not end within maxPages.
func listAll(t testing.TB, ts *trellistest.Service, query url.Values, limit, maxPages int) ([]admin.Timer, int) {
	t.Helper()
	var all []admin.Timer
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	for pages := 1; pages <= maxPages; pages++ {
		resp := fixture.Admin(t, ts, http.MethodGet, "/admin/timers?"+q.Encode())
		if resp.Status != http.StatusOK {
			t.Fatalf("GET /admin/timers?%s: %d %s", q.Encode(), resp.Status, resp.Body)
		}
		var page admin.TimerPage
		resp.JSON(t, &page)
		if page.Timers == nil {
			t.Fatalf("page %d: timers is null, want an array: %s", pages, resp.Body)
		}
		if limit > 0 && len(page.Timers) > limit {
			t.Fatalf("page %d holds %d timers, more than limit %d", pages, len(page.Timers), limit)
		}
		all = append(all, page.Timers...)
		if page.NextCursor == "" {
			return all, pages
		}
		q.Set("cursor", page.NextCursor)
	}
	t.Fatalf("the walk of %v did not end within %d pages", query, maxPages)
	return nil, 0
}

// names are the timers' names, in order.
func names(ts []admin.Timer) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// waitFailing waits (bounded) until the timer called name has failed once,
// and returns it.
func waitFailing(t testing.TB, ts *trellistest.Service, name string) timers.Timer {
	t.Helper()
	var got timers.Timer
	trellistest.Eventually(t, 10*time.Second, "timer "+name+" failed", func() bool {
		tm, err := ts.Host().Timers.Get(context.Background(), name)
		got = tm
		return err == nil && tm.LastError != ""
	})
	return got
}

// jsonKeys decodes a JSON object's keys.
func jsonKeys(t testing.TB, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}
