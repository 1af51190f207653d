package views_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

// benchService starts one instance on a redis-server of the benchmark's
// own, started for it and stopped after it: no key of another run weighs
// on it (a build of a new view lists the states by a scan of the whole
// keyspace), and its keys go with it (they are not deleted one by one).
// It returns the instance and a client of the server.
func benchService(b *testing.B, setup trellis.Setup) (*trellistest.Service, *redis.Client) {
	srv := trellistest.StartRedisServer(b)
	ts := trellistest.StartInstances(b, 1, setup, trellistest.WithRedisURL(srv.URL()), trellistest.WithStorePrefix("bench"))[0]
	trellistest.WaitSettled(b, ts)
	return ts, srv.Client(b)
}

// BenchmarkViewPage: a 50-row page of an indexed query (a customer's open
// orders, newest first, of 500), read through the view (one script in the
// view's slot: its index, then the rows), against a bare go-redis read of
// the same rows in the same run: ZREVRANGE of a sorted set of ids, then
// HGETALL of each row's hash, pipelined. Reports the page's p99 and its
// throughput over the bare read's as x-bare.
func BenchmarkViewPage(b *testing.B) {
	ts, client := benchService(b, app)
	bare := "bench-bare"
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
