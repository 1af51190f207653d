package trellis_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/timedactions"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// adminToken is the admin token of the tests' services (at least 16
// characters, as Config.Validate wants).
const adminToken = "test-admin-token-0123456789abcdef"

// adminArg is the argument of the admin tests' timed action.
type adminArg struct {
	Order string `json:"order"`
	Items []int  `json:"items"`
}

// adminAction is the timed action the admin tests' timers call: ok
// succeeds, fail always fails, so that its timers stay failing and are
// retried with backoff.
var (
	adminAction = timedactions.Define("admin-test-action")
	adminOK     = timedactions.Method(adminAction, "ok",
		func(ctx *timedactions.Ctx, _ adminArg) timedactions.Effect { return ctx.Done() })
	adminFail = timedactions.Method(adminAction, "fail",
		func(ctx *timedactions.Ctx, a adminArg) timedactions.Effect {
			return ctx.Error("refused order %s", a.Order)
		})
)

// adminApp is the counter app plus adminAction.
func adminApp(h *trellis.Host, r chi.Router) error {
	if _, err := adminAction.Start(h.Client); err != nil {
		return err
	}
	return (&counterApp{}).setup(h, r)
}

// startAdmin boots adminApp with the admin token token ("" disables the
// admin API).
func startAdmin(t testing.TB, token string, opts ...trellistest.Option) *trellistest.Service {
	t.Helper()
	opts = append(opts, trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = token }))
	return trellistest.Start(t, adminApp, opts...)
}

// adminDo sends method path to ts with the Authorization header authz
// (none when "").
func adminDo(t testing.TB, ts *trellistest.Service, method, path, authz string) *trellistest.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := ts.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// adminGet is adminDo GET with the right token.
func adminGet(t testing.TB, ts *trellistest.Service, path string) *trellistest.Response {
	t.Helper()
	return adminDo(t, ts, http.MethodGet, path, "Bearer "+adminToken)
}

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
		resp := adminGet(t, ts, "/admin/timers?"+q.Encode())
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
	eventually(t, 10*time.Second, "timer "+name+" failed", func() bool {
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
