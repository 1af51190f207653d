package timers

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// BenchmarkClusterTimerBurst runs the 50,000-timer burst (1 KB arguments, due
// 5 s after creation, one instance) on one Redis and on a Redis Cluster of
// 3 masters and 3 replicas, both started here, in the same run, and prints
// the share of the commands each master served (INFO commandstats). Run
// it with
//
//	go test -run '^$' -bench ClusterTimerBurst -benchtime 1x ./timers/
func BenchmarkClusterTimerBurst(b *testing.B) {
	b.Run("one-redis", func(b *testing.B) {
		for b.Loop() {
			runTimerWorkload(b, workload{n: 50_000, delay: 5 * time.Second, instances: 1})
		}
	})
	b.Run("cluster-3-masters", func(b *testing.B) {
		cl := testenv.StartCluster(b)
		client := cl.Client(b)
		for b.Loop() {
			testenv.ResetCommandStats(b, client)
			runTimerWorkloadOn(b, func() redis.UniversalClient { return cl.Client(b) }, client,
				workload{n: 50_000, delay: 5 * time.Second, instances: 1})
			shares := testenv.CommandShares(b, client)
			b.Logf("  commands served per master: %s", shares)
		}
	})
}
