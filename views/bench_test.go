package views_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

var flagRate = flag.Int("views.rate", 5000, "changes per second BenchmarkViewLag aims at")

// BenchmarkViewLag: orders changed at -views.rate changes/s (as many as the
// machine manages below it) on one instance on Redis; for each change,
// the time from its command's reply to the view's applying it (the wait
// for its position, which reads the view's position at least every 10
// ms). Reports the p99 as p99-lag-ms, and the rate reached.
func BenchmarkViewLag(b *testing.B) {
	ts := trellistest.StartInstances(b, 1, app)[0]
	trellistest.WaitSettled(b, ts)
	const workers = 32
	interval := time.Second / time.Duration(*flagRate)
	var next atomic.Int64
	var mu sync.Mutex
	var lags []time.Duration
	var waits, wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				k := next.Add(1)
				if k > int64(b.N) {
					return
				}
				if d := time.Until(start.Add(time.Duration(k) * interval)); d > 0 {
					time.Sleep(d)
				}
				id := "lag-" + strconv.FormatInt(k%500, 10)
				if _, err := putOrder.Invoke(context.Background(), ts.Host().Client, id, order{Customer: "c", Status: "open", Total: int(k)}); err != nil {
					b.Error(err)
					return
				}
				committed := time.Now()
				pos, err := ts.Host().Views().Written(context.Background(), orders.ComponentID(), id)
				if err != nil {
					b.Error(err)
					return
				}
				waits.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), waitLong)
					defer cancel()
					if err := ts.Host().Views().WaitFor(ctx, orderView.Name(), pos); err != nil {
						b.Error(err)
						return
					}
					lag := time.Since(committed)
					mu.Lock()
					lags = append(lags, lag)
					mu.Unlock()
				})
			}
		})
	}
	wg.Wait()
	waits.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lags) == 0 {
		return
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "p99-lag-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "changes/s")
}

// BenchmarkViewPage: a 50-row page of an indexed query (a customer's open
// orders, newest first, of 500), read through the view (one script in the
// view's slot: its index, then the rows), against a bare go-redis read of
// the same rows in the same run: ZREVRANGE of a sorted set of ids, then
// HGETALL of each row's hash, pipelined. Reports the page's p99 and its
// throughput over the bare read's as x-bare.
func BenchmarkViewPage(b *testing.B) {
	ts := trellistest.StartInstances(b, 1, app)[0]
	trellistest.WaitSettled(b, ts)
	client := trellistest.Redis(b)
	bare := "bench-bare-" + rand.Text()
	b.Cleanup(func() {
		keys, _ := client.Keys(context.Background(), bare+":*").Result()
		if len(keys) > 0 {
			client.Del(context.Background(), keys...)
		}
	})
	var positions []string
	pipe := client.Pipeline()
	for i := range 500 {
		id := fmt.Sprintf("p-%03d", i)
		o := order{Customer: "bench", Status: "open", Created: int64(i), Total: i}
		positions = append(positions, put(b, ts, id, o))
		pipe.ZAdd(context.Background(), bare+":idx", redis.Z{Score: float64(i), Member: id})
		pipe.HSet(context.Background(), bare+":row:"+id, "id", id, "customer", o.Customer, "status", o.Status, "created", o.Created, "total", o.Total)
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		b.Fatal(err)
	}
	caughtUp(b, ts, positions...)
	req := views.Request{Params: map[string]string{"customer": "bench", "status": "open"}, Limit: 50}
	ctx := context.Background()
	b.ResetTimer()
	took := make([]time.Duration, 0, b.N)
	start := time.Now()
	for range b.N {
		t0 := time.Now()
		p, err := byCustomer.Page(ctx, ts.Host().Views(), req)
		if err != nil || len(p.Rows) != 50 {
			b.Fatalf("page: %v, %d rows", err, len(p.Rows))
		}
		took = append(took, time.Since(t0))
	}
	viewTime := time.Since(start)
	start = time.Now()
	for range b.N {
		ids, err := client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: bare + ":idx", Start: 0, Stop: 49, Rev: true}).Result()
		if err != nil || len(ids) != 50 {
			b.Fatalf("bare range: %v, %d ids", err, len(ids))
		}
		pipe := client.Pipeline()
		for _, id := range ids {
			pipe.HGetAll(ctx, bare+":row:"+id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	bareTime := time.Since(start)
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-page-ms")
	b.ReportMetric(bareTime.Seconds()/viewTime.Seconds(), "x-bare")
}
