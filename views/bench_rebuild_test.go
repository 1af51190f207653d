package views_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

var flagRebuildRows = flag.Int("views.rebuild-rows", 2000, "orders BenchmarkViewBuild builds a view of (the issue's figure: 1000000)")

// BenchmarkViewBuild: -views.rebuild-rows orders on one instance on Redis,
// then a view of them started anew (a new view, as a rebuild is: built
// from the entities' current states, shard by shard); the time until
// every shard's rows are built (its position reached), against a bare
// go-redis pipeline writing the same number of rows (a hash per row and
// a sorted-set entry per query, 100 rows a round trip) in the same run.
// Reports rows/s, bare-rows/s and their ratio x-bare. Each iteration
// builds one more view of the same orders.
func BenchmarkViewBuild(b *testing.B) {
	ts := trellistest.StartInstances(b, 1, app)[0]
	trellistest.WaitSettled(b, ts)
	n := *flagRebuildRows
	heads := writeOrders(b, ts, n)
	client := trellistest.Redis(b)
	bare := "bench-bare-build-" + rand.Text()
	b.Cleanup(func() {
		var cursor uint64
		for {
			keys, next, _ := client.Scan(context.Background(), cursor, bare+":*", 1000).Result()
			if len(keys) > 0 {
				client.Del(context.Background(), keys...)
			}
			if cursor = next; cursor == 0 {
				return
			}
		}
	})
	ctx := context.Background()
	var built, bareTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := views.Define(fmt.Sprintf("bench-build-%s-%d", rand.Text()[:8], i), orders, toRow)
		v.Query("by-customer", views.Eq("customer", "status"), views.SortBy("created", views.Desc))
		v.Query("by-total", views.Range("total"))
		v.Query("all")
		start := time.Now()
		if err := v.Start(ts.Host().Views()); err != nil {
			b.Fatal(err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, time.Duration(n/100+60)*time.Second)
		for _, pos := range heads {
			if err := ts.Host().Views().WaitFor(waitCtx, v.Name(), pos); err != nil {
				cancel()
				b.Fatal(err)
			}
		}
		cancel()
		built += time.Since(start)

		start = time.Now()
		for from := 0; from < n; from += 100 {
			pipe := client.Pipeline()
			for j := from; j < min(n, from+100); j++ {
				id := fmt.Sprintf("b-%07d", j)
				pipe.HSet(ctx, bare+":row:"+id, "customer", "c", "status", "open", "created", j, "total", j)
				for _, q := range []string{"by-customer", "by-total", "all"} {
					pipe.ZAdd(ctx, bare+":"+q, redis.Z{Member: id})
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
		bareTime += time.Since(start)
	}
	b.StopTimer()
	rows := float64(n) * float64(b.N)
	b.ReportMetric(rows/built.Seconds(), "rows/s")
	b.ReportMetric(rows/bareTime.Seconds(), "bare-rows/s")
	b.ReportMetric(bareTime.Seconds()/built.Seconds(), "x-bare")
}

// writeOrders writes n orders through ts, 64 at a time, and returns the
// position of each shard's last change.
func writeOrders(b *testing.B, ts *trellistest.Service, n int) map[int]views.Position {
	var mu sync.Mutex
	heads := make(map[int]views.Position)
	ids := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range ids {
				id := fmt.Sprintf("b-%07d", i)
				if _, err := putOrder.Invoke(context.Background(), ts.Host().Client, id, order{Customer: "c", Status: "open", Created: int64(i), Total: i}); err != nil {
					b.Error(err)
					continue
				}
				pos, err := ts.Host().Views().Written(context.Background(), orders.ComponentID(), id)
				if err != nil {
					b.Error(err)
					continue
				}
				mu.Lock()
				if pos.Seq > heads[pos.Shard].Seq {
					heads[pos.Shard] = pos
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	wg.Wait()
	return heads
}
