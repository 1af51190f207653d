package trellis_test

import (
	"crypto/rand"
	"io"
	"log/slog"
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// BenchmarkClusterHTTPEntityRoundTrip drives the HTTP entity round trip
// (POST increase + GET, 32 keep-alive clients, the whole stack) at the
// service on one Redis and at the service on a Redis Cluster of 3 masters
// and 3 replicas started here, alternating in the same run, and prints the
// share of the commands each master served (INFO commandstats). Needs a
// Redis (TRELLIS_TEST_REDIS_URL):
//
//	go test -run '^$' -bench ClusterHTTPEntityRoundTrip -benchtime 3x .
func BenchmarkClusterHTTPEntityRoundTrip(b *testing.B) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	info := trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo })
	one := trellistest.Start(b, (&fixture.CounterApp{}).Setup, trellistest.WithRedisURL(trellistest.RedisURL(b)),
		trellistest.WithLogger(logger), info)
	cl := testenv.StartCluster(b)
	url := cl.URL()
	onCluster := trellistest.Start(b, (&fixture.CounterApp{}).Setup, trellistest.WithLogger(logger), info,
		trellistest.WithStorePrefix("trellis-bench-"+rand.Text()),
		trellistest.WithConfig(func(c *trellis.Config) { c.RedisClusterURL = url }))
	stats := cl.Client(b)

	client := newLoadClient()
	b.Cleanup(client.Close)
	for _, base := range []string{one.URL, onCluster.URL} {
		if _, err := runLoad(client, base, benchWorkers*4, false); err != nil {
			b.Fatal(err)
		}
	}
	testenv.ResetCommandStats(b, stats)

	var oneRes, clusterRes loadResult
	for b.Loop() {
		r, err := runLoad(client, one.URL, benchRoundTrips, false)
		if err != nil {
			b.Fatal(err)
		}
		oneRes.merge(r)
		r, err = runLoad(client, onCluster.URL, benchRoundTrips, false)
		if err != nil {
			b.Fatal(err)
		}
		clusterRes.merge(r)
	}
	b.ReportMetric(oneRes.rps(), "one-redis-req/s")
	b.ReportMetric(clusterRes.rps(), "cluster-req/s")
	b.ReportMetric(oneRes.p99().Seconds()*1000, "one-redis-p99-ms")
	b.ReportMetric(clusterRes.p99().Seconds()*1000, "cluster-p99-ms")
	b.Logf("%d workers, %d round trips (POST+GET) each: one Redis %.0f req/s p99 %v; cluster %.0f req/s p99 %v; ratio %.2fx",
		benchWorkers, len(oneRes.latencies)/2, oneRes.rps(), oneRes.p99(), clusterRes.rps(), clusterRes.p99(),
		clusterRes.rps()/oneRes.rps())
	b.Logf("commands served per master: %s", testenv.CommandShares(b, stats))
}
