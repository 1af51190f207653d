package views_test

import (
	"context"
	"flag"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/trellistest"
)

var flagRate = flag.Int("views.rate", 5000, "changes per second BenchmarkViewLag and BenchmarkViewLagWrites offer")

// lagOrders is how many orders the lag benchmarks change, in turn.
const lagOrders = 500

// lagInFlight is how many of the lag benchmarks' writes may be under way
// at once: when the writes fall this far behind, the offered rate is not
// reached.
const lagInFlight = 512

// BenchmarkViewLag: orders changed at -views.rate changes/s offered on
// one instance on Redis (each change started on its schedule, whatever
// the ones before; at most lagInFlight under way), and for each change the
// time from its command's reply to the view's applying it (the wait for
// its position). Each order is written, and waited for, once before the
// clock starts (the view is new: it is built first). Reports the p99 as
// p99-lag-ms (and the p50), the rate offered (offered-changes/s) and the
// rate the writes reached (changes/s). BenchmarkViewLagWrites is the
// same writes with no view.
func BenchmarkViewLag(b *testing.B) {
	ts, _ := benchService(b, app)
	ctx := context.Background()
	for i := range lagOrders {
		caughtUp(b, ts, put(b, ts, "lag-"+strconv.Itoa(i), order{Customer: "c", Status: "open"}))
	}
	var mu sync.Mutex
	lags := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	reached := offerChanges(b, ts, func(id string, committed time.Time) {
		pos, err := ts.Host().Views().Written(ctx, orders.ComponentID(), id)
		if err != nil {
			b.Error(err)
			return
		}
		waitCtx, cancel := context.WithTimeout(ctx, waitLong)
		defer cancel()
		if err := ts.Host().Views().WaitFor(waitCtx, orderView.Name(), pos); err != nil {
			b.Error(err)
			return
		}
		lag := time.Since(committed)
		mu.Lock()
		lags = append(lags, lag)
		mu.Unlock()
	})
	b.StopTimer()
	if len(lags) == 0 {
		return
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "p99-lag-ms")
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "p50-lag-ms")
	b.ReportMetric(float64(*flagRate), "offered-changes/s")
	b.ReportMetric(reached, "changes/s")
}

// BenchmarkViewLagWrites: BenchmarkViewLag's writes on a service with no
// view (so the store records no change log either): the rate the writes
// reach on their own. Reports offered-changes/s and changes/s.
func BenchmarkViewLagWrites(b *testing.B) {
	ts, _ := benchService(b, func(h *trellis.Host, _ chi.Router) error {
		_, err := orders.Start(h.Entities())
		return err
	})
	b.ResetTimer()
	reached := offerChanges(b, ts, nil)
	b.StopTimer()
	b.ReportMetric(float64(*flagRate), "offered-changes/s")
	b.ReportMetric(reached, "changes/s")
}

// offerChanges writes b.N changes to lagOrders orders through ts, each
// started on its schedule at -views.rate changes/s (at most lagInFlight
// under way), and calls then, if not nil, with the order's id and when
// its command replied, once the write is counted done. It returns the
// rate of the writes: b.N over the time until the last replied.
func offerChanges(b *testing.B, ts *trellistest.Service, then func(id string, committed time.Time)) float64 {
	interval := time.Second / time.Duration(*flagRate)
	var mu sync.Mutex
	var last time.Duration // when the last write replied, since start
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, lagInFlight)
	start := time.Now()
	for k := range b.N {
		if d := time.Until(start.Add(time.Duration(k) * interval)); d > 0 {
			time.Sleep(d)
		}
		inFlight <- struct{}{}
		wg.Go(func() {
			id := "lag-" + strconv.Itoa(k%lagOrders)
			_, err := putOrder.Invoke(context.Background(), ts.Host().Client, id, order{Customer: "c", Status: "open", Total: k})
			committed := time.Now()
			mu.Lock()
			last = max(last, committed.Sub(start))
			mu.Unlock()
			<-inFlight
			if err != nil {
				b.Error(err)
				return
			}
			if then != nil {
				then(id, committed)
			}
		})
	}
	wg.Wait()
	return float64(b.N) / last.Seconds()
}
