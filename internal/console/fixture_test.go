package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/trellis-go/trellis"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testenv"
	"github.com/trellis-go/trellis/timedactions"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// adminToken is the admin token of the tests' services.
const adminToken = "console-test-token-0123456789abcdef"

// orderArg is the argument of the tests' timed action.
type orderArg struct {
	Order string `json:"order"`
	Items []int  `json:"items,omitempty"`
}

// orderAction is what the tests' timers call: ok succeeds, fail always
// fails, so that its timers stay failing and are retried with backoff.
var (
	orderAction = timedactions.Define("console-test-orders")
	orderOK     = timedactions.Method(orderAction, "expireOrder",
		func(ctx *timedactions.Ctx, _ orderArg) timedactions.Effect { return ctx.Done() })
	orderFail = timedactions.Method(orderAction, "chargePayment",
		func(ctx *timedactions.Ctx, a orderArg) timedactions.Effect {
			return ctx.Error("payment provider refused order %s", a.Order)
		})
)

// app starts orderAction; the service has no routes of its own.
func app(h *trellis.Host, _ chi.Router) error {
	_, err := orderAction.Start(h.Client)
	return err
}

// startService boots a service with the admin token token ("" leaves the
// admin API and the console off), on the store opts select.
func startService(t testing.TB, token string, opts ...trellistest.Option) *trellistest.Service {
	t.Helper()
	opts = append(opts, trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = token }))
	return trellistest.Start(t, app, opts...)
}

// storeCase is one state store the tests run against.
type storeCase struct {
	name string                                  // subtest name
	opts func(t testing.TB) []trellistest.Option // options selecting the store
}

var stores = []storeCase{
	{name: "memory", opts: func(testing.TB) []trellistest.Option { return nil }},
	{name: "redis", opts: func(t testing.TB) []trellistest.Option {
		return []trellistest.Option{trellistest.WithRedisURL(testenv.RedisURL(t))}
	}},
}

// call is the deferred call of orderAction's method for order.
func call(t testing.TB, failing bool, order string) components.DeferredCall {
	t.Helper()
	m := orderOK
	if failing {
		m = orderFail
	}
	c, err := m.Deferred(orderArg{Order: order, Items: []int{4, 2}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// create creates a timer on ts's scheduler, due delay from its clock's now.
func create(t testing.TB, ts *trellistest.Service, name string, delay time.Duration, c components.DeferredCall, opts ...timers.CreateOption) {
	t.Helper()
	if _, err := ts.Service.Host().Timers.Create(context.Background(), name, delay, c, opts...); err != nil {
		t.Fatal(err)
	}
}

// fixture is the timers the console tests look at, created at t0 (the
// fake clock's start), after the clock moved 2 s:
//
//	payment-retry-1, -2           chargePayment, due t0+1s, failed at t0+2s: due again t0+5s
//	order-expiration-o-01 … -25   expireOrder, due t0+1m … t0+25m
//	report/daily 1                expireOrder, due t0+2h, maxRetries 3 (outside the chart's hour)
//
// So: 28 active, 2 failing, 3 due within a minute (the payments and
// o-01), and over the next hour 7 timers in the first five minutes (the
// payments, o-01 to o-05), then 5 in each of the next four.
func fixture(t testing.TB, ts *trellistest.Service) {
	t.Helper()
	for i := 1; i <= 25; i++ {
		order := fmt.Sprintf("o-%02d", i)
		create(t, ts, "order-expiration-"+order, time.Duration(i)*time.Minute, call(t, false, order))
	}
	create(t, ts, "report/daily 1", 2*time.Hour, call(t, false, "daily"), timers.WithMaxRetries(3))
	for _, n := range []string{"payment-retry-1", "payment-retry-2"} {
		create(t, ts, n, time.Second, call(t, true, n))
	}
	// Past the payments' due time by more than the store's millisecond
	// rounding (due times round up, now rounds down): they run and fail.
	ts.Clock.Advance(2 * time.Second)
	for _, n := range []string{"payment-retry-1", "payment-retry-2"} {
		testenv.Eventually(t, 10*time.Second, n+" failed once", func() bool {
			tm, err := ts.Service.Host().Timers.Get(context.Background(), n)
			return err == nil && tm.LastError != ""
		})
	}
}

// fixtureChart is the chart of the fixture: overdue, then the counts of
// the twelve five-minute buckets.
var fixtureChart = []int{0, 7, 5, 5, 5, 5, 0, 0, 0, 0, 0, 0, 0}

// get is send with GET.
func get(t testing.TB, ts *trellistest.Service, path, authz string, header ...string) (*http.Response, []byte) {
	t.Helper()
	return send(t, ts, http.MethodGet, path, authz, header...)
}

// send sends method path to ts with the Authorization header authz (none
// when "") and the header's name-value pairs, and returns the response
// with its body read. It follows no redirect.
func send(t testing.TB, ts *trellistest.Service, method, path, authz string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	// The console's own redirect is part of what is tested.
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	client.CloseIdleConnections()
	return resp, body
}
