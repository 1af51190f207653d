package views_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

var flagRebuildRows = flag.Int("views.rebuild-rows", 2000, "orders BenchmarkViewBuild builds a view of (the issue's figure: 1000000)")

// BenchmarkViewBuild: -views.rebuild-rows orders on one instance on Redis
// (their states written in the store's layout by a pipeline, as a restore
// would, then one order a shard written again through the instance, to
// have a position to wait for), then a view of them started anew (a new
// view, as a rebuild is: built from the entities' current states, shard
// by shard); the time until every shard's rows are built (its position
// reached), against a bare go-redis pipeline writing the same number of
// rows (a hash per row and a sorted-set entry per query, 100 rows a round
// trip) in the same run. Reports rows/s, bare-rows/s and their ratio
// x-bare. Each iteration builds one more view of the same orders.
func BenchmarkViewBuild(b *testing.B) {
	ts, client := benchService(b, app)
	n := *flagRebuildRows
	seeded := time.Now()
	heads := seedOrders(b, ts, client, n)
	b.Logf("%d orders seeded in %v", n, time.Since(seeded).Round(time.Millisecond))
	bare := "bench-bare-build"
	ctx := context.Background()
	var built, bareTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := views.Define(fmt.Sprintf("bench-build-%d", i), orders, toRow)
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
		b.Logf("view %d built in %v", i, time.Since(start).Round(time.Millisecond))

		start = time.Now()
		for from := 0; from < n; from += 100 {
			pipe := client.Pipeline()
			for j := from; j < min(n, from+100); j++ {
				id := orderID(j)
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

func orderID(i int) string { return fmt.Sprintf("b-%07d", i) }

// seedOrders writes n orders' states into ts's store directly (revision
// 1, 1000 a round trip), then writes the first order of each shard again
// through ts, and returns the position of each of those writes.
func seedOrders(b *testing.B, ts *trellistest.Service, client *redis.Client, n int) map[int]views.Position {
	ctx := context.Background()
	layout := entities.NewShardedRedisStore(client, ts.Host().Config.RedisPrefix)
	first := make(map[int]int)
	for from := 0; from < n; from += 1000 {
		pipe := client.Pipeline()
		for i := from; i < min(n, from+1000); i++ {
			data, err := json.Marshal(order{Customer: "c", Status: "open", Created: int64(i), Total: i})
			if err != nil {
				b.Fatal(err)
			}
			pipe.HSet(ctx, layout.StateKey(orders.ComponentID(), orderID(i)), "data", data, "rev", "1")
			if shard := cluster.ShardOf(orders.ComponentID(), orderID(i)); first[shard] == 0 {
				first[shard] = i + 1
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	heads := make(map[int]views.Position)
	for shard, i := range first {
		o := order{Customer: "c", Status: "open", Created: int64(i - 1), Total: i - 1}
		if _, err := putOrder.Invoke(ctx, ts.Host().Client, orderID(i-1), o); err != nil {
			b.Fatal(err)
		}
		pos, err := ts.Host().Views().Written(ctx, orders.ComponentID(), orderID(i-1))
		if err != nil {
			b.Fatal(err)
		}
		heads[shard] = pos
	}
	return heads
}
