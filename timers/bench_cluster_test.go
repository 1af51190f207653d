package timers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testenv"
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
			runTimerWorkload(b, 50_000, 5*time.Second, 0, 1, false)
		}
	})
	b.Run("cluster-3-masters", func(b *testing.B) {
		cl := testenv.StartCluster(b)
		client := cl.Client(b)
		for b.Loop() {
			testenv.ResetCommandStats(b, client)
			runTimerWorkloadOn(b, func() redis.UniversalClient { return cl.Client(b) },
				func() int64 { return clusterUsedMemory(b, client) }, 50_000, 5*time.Second, 0, 1, false)
			shares := testenv.CommandShares(b, client)
			b.Logf("  commands served per master: %s", shares)
		}
	})
}

// clusterUsedMemory is used_memory summed over the masters.
func clusterUsedMemory(b *testing.B, client *redis.ClusterClient) int64 {
	var total atomic.Int64
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		total.Add(usedMemory(b, m))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total.Load()
}
