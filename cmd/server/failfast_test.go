package main

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/trellistest"
)

// failFastWithin is how soon a route must answer while the store is
// frozen, with the default request timeout (30 s) and Redis URL: at worst
// a wait for a free connection (go-redis's pool timeout, its read timeout
// plus 1 s: 6 s) while the others hang on the frozen store, then a new
// connection's HELLO and the command itself, each up to the read timeout
// (5 s), plus what a loaded machine needs. Before the client's retries
// were turned off, a pipelined read (the admin routes') was sent four
// times and hit the 30 s timeout.
const failFastWithin = 18 * time.Second

// failFastRoutes are one route per entity or timer read (an entity runs
// its commands one at a time, so a second route on the same one would
// wait for the first): the admin reads, an entity read and a write.
var failFastRoutes = []storeRoute{
	{method: http.MethodGet, path: "/admin/timers", admin: true},
	{method: http.MethodGet, path: "/admin/timers/stats", admin: true},
	{method: http.MethodGet, path: "/admin/timers/order-{order}", admin: true},
	{method: http.MethodGet, path: "/counters/failfast"},
	{method: http.MethodPost, path: "/orders/{order}/confirm"},
}

// TestStoreFrozenFailsFast freezes the Redis of a service that runs with
// the default settings: the admin reads answer within failFastWithin, as
// the entity routes do, not at the 30 s request timeout. A read answers 503
// with Retry-After ("nothing was changed"); a write answers 503 or, when
// it was sent and its reply lost, the 504 outcome-unknown problem.
func TestStoreFrozenFailsFast(t *testing.T) {
	trellistest.Long(t)
	rs := trellistest.StartRedisServer(t)
	ts, order := startWithOrder(t, rs.URL(), "failfast", 0)
	rs.Freeze()
	defer rs.Thaw() // before the service's shutdown, registered earlier, runs

	var wg sync.WaitGroup
	for _, rt := range failFastRoutes {
		wg.Go(func() {
			resp, took, err := callRoute(ts, rt, order)
			if err != nil {
				t.Errorf("%s %s: %v", rt.method, rt.path, err)
				return
			}
			t.Logf("%s %s: %d in %v", rt.method, rt.path, resp.Status, took.Round(time.Millisecond))
			read := rt.method == http.MethodGet
			unknown := resp.Status == http.StatusGatewayTimeout && resp.Header.Get("Content-Type") == api.ContentTypeProblem &&
				!read && jsonField(resp.Body, "type") == api.ProblemTypeOutcomeUnknown
			switch {
			case took > failFastWithin:
				t.Errorf("%s %s: answered %d after %v, want within %v", rt.method, rt.path, resp.Status, took, failFastWithin)
			case resp.Status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
			case unknown:
			default:
				t.Errorf("%s %s: status %d: %s; want 503 with Retry-After, or a write's 504 outcome unknown", rt.method, rt.path, resp.Status, resp.Body)
			}
		})
	}
	wg.Wait()
}

// jsonField is the string field name of the JSON object body, "" when
// there is none.
func jsonField(body []byte, name string) string {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	s, _ := m[name].(string)
	return s
}
