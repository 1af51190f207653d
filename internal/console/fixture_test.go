package console_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// The service, its timed action, the stores and the admin token are those
// of package fixture, shared with the tests of the admin API.

// create creates a timer on ts's scheduler, due delay from its clock's now.
func create(t testing.TB, ts *trellistest.Service, name string, delay time.Duration, c components.DeferredCall, opts ...timers.CreateOption) {
	t.Helper()
	if _, err := ts.Service.Host().Timers.Create(context.Background(), name, delay, c, opts...); err != nil {
		t.Fatal(err)
	}
}

// createTimers creates the timers the console tests look at, created at t0 (the
// fake clock's start), after the clock moved 2 s:
//
//	payment-retry-1, -2           chargePayment, due t0+1s, failed at t0+2s: due again t0+5s
//	order-expiration-o-01 … -25   expireOrder, due t0+1m … t0+25m
//	report/daily 1                expireOrder, due t0+2h, maxRetries 3 (outside the chart's hour)
//
// So: 28 active, 2 failing, 3 due within a minute (the payments and
// o-01), and over the next hour 7 timers in the first five minutes (the
// payments, o-01 to o-05), then 5 in each of the next four.
func createTimers(t testing.TB, ts *trellistest.Service) {
	t.Helper()
	for i := 1; i <= 25; i++ {
		order := fmt.Sprintf("o-%02d", i)
		create(t, ts, "order-expiration-"+order, time.Duration(i)*time.Minute, fixture.Call(t, false, order))
	}
	create(t, ts, "report/daily 1", 2*time.Hour, fixture.Call(t, false, "daily"), timers.WithMaxRetries(3))
	for _, n := range []string{"payment-retry-1", "payment-retry-2"} {
		create(t, ts, n, time.Second, fixture.Call(t, true, n))
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

// get sends GET path to ts with the Authorization header authz (none when
// "") and the header's name-value pairs; it follows no redirect.
func get(t testing.TB, ts *trellistest.Service, path, authz string, header ...string) *trellistest.Response {
	t.Helper()
	return fixture.Send(t, ts, http.MethodGet, path, authz, header...)
}
