package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

// outageToken is the admin token of the outage tests.
const outageToken = "outage-test-admin-token-0123456789"

// storeRoute is one route the outage tests call while the store fails.
type storeRoute struct {
	method, path string // the request; {order} is replaced by a placed order's id
	body         any    // the JSON body, nil for none
	admin        bool   // sent with the admin token
	// memory marks a read of an entity the service holds in memory: its
	// owner answers it from memory while its shard's lease is surely
	// valid (a correct answer, Redis or not), then 503.
	memory bool
}

// storeRoutes are the routes that need the store: every one of them must
// answer an outage with a problem, never a 500 or silence.
var storeRoutes = []storeRoute{
	{method: http.MethodGet, path: "/counters/outage"},
	{method: http.MethodPost, path: "/counters/outage/increase", body: map[string]int{"by": 1}},
	{method: http.MethodDelete, path: "/counters/outage"},
	{method: http.MethodPost, path: "/orders", body: map[string]any{"item": "outage", "quantity": 1}},
	{method: http.MethodGet, path: "/orders/{order}", memory: true},
	{method: http.MethodPost, path: "/orders/{order}/confirm"},
	{method: http.MethodPost, path: "/orders/{order}/cancel"},
	{method: http.MethodGet, path: "/admin/timers", admin: true},
	{method: http.MethodGet, path: "/admin/timers/stats", admin: true},
	{method: http.MethodGet, path: "/admin/timers/order-{order}", admin: true},
	{method: http.MethodDelete, path: "/admin/timers/order-{order}", admin: true},
	{method: http.MethodGet, path: "/readyz"},
}

// startOnOwnRedis runs the server's setup on a redis-server of the test's
// own, with a request timeout of timeout, and places one order while the
// store is up; it returns the service, the server and the order's id.
func startOnOwnRedis(t *testing.T, timeout time.Duration) (*trellistest.Service, *trellistest.RedisServer, string) {
	t.Helper()
	rs := trellistest.StartRedisServer(t)
	// The keys die with the server: nothing to remove.
	ts, order := startWithOrder(t, rs.URL(), "outage", timeout)
	return ts, rs, order
}

// startWithOrder runs the server's setup on the Redis at url with keys
// under prefix, the outage token and a request timeout of timeout (0: the
// default), checks its answers against the contracts, and places one
// order; it returns the service and the order's id.
func startWithOrder(t *testing.T, url, prefix string, timeout time.Duration) (*trellistest.Service, string) {
	t.Helper()
	ts := trellistest.Start(t, setup(&samples{}),
		trellistest.WithRedisURL(url),
		trellistest.WithStorePrefix(prefix),
		trellistest.WithConfig(func(c *trellis.Config) {
			c.AdminToken = outageToken
			if timeout > 0 {
				c.RequestTimeout = timeout
			}
		}),
		trellistest.WithServiceOptions(trellis.WithContract(contract.Spec)))
	validateAgainstContracts(t, ts)
	resp := ts.Post(t, "/orders", map[string]any{"item": "before the outage", "quantity": 1})
	var o contract.Order
	resp.JSON(t, &o)
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST /orders before the outage: %d %s", resp.Status, resp.Body)
	}
	return ts, o.Id
}

// validateAgainstContracts makes every response ts's client reads go
// through the contracts: the samples' and the framework's.
func validateAgainstContracts(t *testing.T, ts *trellistest.Service) {
	ts.HTTP.Transport = trellistest.CheckContracts(t, ts.HTTP.Transport, contract.Spec, api.Spec)
}

// callRoute sends rt (with order as the order id) and returns the
// response and how long it took. It may be called from any goroutine.
func callRoute(ts *trellistest.Service, rt storeRoute, order string) (*trellistest.Response, time.Duration, error) {
	path := strings.ReplaceAll(rt.path, "{order}", order)
	var body io.Reader
	if rt.body != nil {
		b, err := json.Marshal(rt.body)
		if err != nil {
			return nil, 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), rt.method, ts.URL+path, body)
	if err != nil {
		return nil, 0, err
	}
	if rt.body != nil {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	if rt.admin {
		req.Header.Set("Authorization", "Bearer "+outageToken)
	}
	start := time.Now()
	resp, err := ts.Send(req)
	return resp, time.Since(start), err
}

// TestStoreDownIs503 stops the Redis of a running service: every route
// that needs the store answers 503 problem+json with Retry-After, whether
// the error comes from an entity, the timer store or the component client
// (a read its owner answers from memory may answer 200).
func TestStoreDownIs503(t *testing.T) {
	trellistest.Long(t)
	ts, rs, order := startOnOwnRedis(t, 5*time.Second)
	rs.Stop()
	for _, rt := range storeRoutes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			resp, _, err := callRoute(ts, rt, order)
			if err != nil {
				t.Fatal(err)
			}
			if rt.memory && resp.Status == http.StatusOK {
				return
			}
			if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != api.ContentTypeProblem {
				t.Fatalf("status %d %s: %s; want a 503 problem", resp.Status, resp.Header.Get("Content-Type"), resp.Body)
			}
			if got := resp.Header.Get("Retry-After"); got == "" {
				t.Fatalf("no Retry-After on the 503: %s", resp.Body)
			}
		})
	}
}

// TestStoreFrozenAnswersByDeadline freezes the Redis of a running service
// (SIGSTOP: connections open, nothing answered) after setting a long read
// timeout in its URL: every route still answers by the request timeout,
// /readyz by its own 2 s bound, all at once.
func TestStoreFrozenAnswersByDeadline(t *testing.T) {
	const timeout = time.Second
	rs := trellistest.StartRedisServer(t)
	ts, order := startWithOrder(t, rs.URL()+"?read_timeout=60s&write_timeout=60s", "frozen", timeout)
	rs.Freeze()
	defer rs.Thaw() // before the service's shutdown, registered earlier, runs

	var wg sync.WaitGroup
	for _, rt := range storeRoutes {
		wg.Go(func() {
			resp, took, err := callRoute(ts, rt, order)
			// The deadline, plus what a loaded machine needs to answer.
			limit := timeout + time.Second
			if rt.path == "/readyz" {
				limit = 3 * time.Second
			}
			switch {
			case err != nil:
				t.Errorf("%s %s: %v", rt.method, rt.path, err)
			case took > limit:
				t.Errorf("%s %s: answered after %v, want within %v", rt.method, rt.path, took, limit)
			case rt.memory && resp.Status == http.StatusOK:
			case resp.Status != http.StatusServiceUnavailable && resp.Status != http.StatusGatewayTimeout:
				t.Errorf("%s %s: status %d: %s; want 503 or 504", rt.method, rt.path, resp.Status, resp.Body)
			}
		})
	}
	wg.Wait()
}
