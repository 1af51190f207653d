package entities_test

import (
	"context"
	goruntime "runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// benchParallelism is BenchmarkCommandIdentity's goroutines per
// GOMAXPROCS, each increasing an entity of its own: enough that the
// entities' actors and Redis are all busy, as under load.
const benchParallelism = 8

// BenchmarkCommandIdentity: what recording a command's identity with its
// write costs per command on Redis, under load (parallel increases over
// an entity per goroutine): without one, with the platform's command id
// (kept DefaultCommandIDRetention) and with a caller's idempotency key
// (kept DefaultKeyRetention), on both layouts (RedisStore, and a
// ShardedRedisStore writing under its shard's fence, as a cluster's owner
// does). The entities are loaded before the clock starts. Besides the
// time per command (ns/op), it reports what the records take in Redis per
// command (redis-bytes/cmd: MEMORY USAGE of the keys written, over the
// commands) and Redis's own CPU time per command (redis-cpu-us/cmd: the
// server's user and system time over the commands; Redis is one thread
// that every instance of a cluster writes through).
func BenchmarkCommandIdentity(b *testing.B) {
	cases := []struct {
		name string
		with func(ctx context.Context) context.Context // a command's context
	}{
		{name: "none", with: func(ctx context.Context) context.Context { return ctx }},
		{name: "command-id", with: func(ctx context.Context) context.Context {
			return components.WithCommandID(ctx, uuid.NewString())
		}},
		{name: "idempotency-key", with: func(ctx context.Context) context.Context {
			return components.WithIdempotencyKey(ctx, uuid.NewString())
		}},
	}
	layouts := []struct {
		name string
		make func(b *testing.B, client *redis.Client, prefix string) entities.Store
	}{
		{"redis", func(b *testing.B, client *redis.Client, prefix string) entities.Store {
			return entities.NewRedisStore(client, prefix)
		}},
		{"sharded", func(b *testing.B, client *redis.Client, prefix string) entities.Store {
			return &fencedWriter{ShardedRedisStore: newTestShardedStore(b, client, prefix), owner: joinOwner(b, client, prefix, "a")}
		}},
	}
	client := testenv.Redis(b)
	for _, layout := range layouts {
		for _, c := range cases {
			b.Run(layout.name+"/"+c.name, func(b *testing.B) {
				prefix := newTestPrefix()
				b.Cleanup(func() { testenv.DeleteKeys(b, client, prefix+":*") })
				invoker := benchRedisHost(b, layout.make(b, client, prefix))
				ctx := context.Background()
				for i := range benchParallelism * goruntime.GOMAXPROCS(0) {
					if _, err := benchIncrease.Invoke(ctx, invoker, "c"+strconv.Itoa(i), 1); err != nil {
						b.Fatal(err)
					}
				}
				var next, commands atomic.Int64 // entities taken, commands sent
				before := testenv.ReadRedisInfo(b, client)
				b.ReportAllocs()
				b.SetParallelism(benchParallelism)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					id := "c" + strconv.FormatInt(next.Add(1)-1, 10)
					for pb.Next() {
						commands.Add(1)
						if _, err := benchIncrease.Invoke(c.with(ctx), invoker, id, 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				n := float64(max(commands.Load(), 1))
				b.ReportMetric((testenv.ReadRedisInfo(b, client).CPU-before.CPU).Seconds()*1e6/n, "redis-cpu-us/cmd")
				b.ReportMetric(float64(redisBytes(b, client, "*"+prefix+"*"))/n, "redis-bytes/cmd")
			})
		}
	}
}

// benchRedisHost starts benchCounters on a runtime system over store,
// stopped when b ends, and returns the client that reaches it.
func benchRedisHost(b *testing.B, store entities.Store) *components.Client {
	sys := testenv.System(b, b.Name())
	client := components.NewClient(components.NewRegistry())
	if _, err := benchCounters.Start(entities.Host{System: sys, Client: client, Store: store}); err != nil {
		b.Fatal(err)
	}
	return client
}

// redisBytes is the sum of MEMORY USAGE of the keys that match pattern.
func redisBytes(b *testing.B, client *redis.Client, pattern string) int64 {
	b.Helper()
	ctx := context.Background()
	var total int64
	iter := client.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		n, err := client.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			b.Fatalf("MEMORY USAGE %s: %v", iter.Val(), err)
		}
		total += n
	}
	if err := iter.Err(); err != nil {
		b.Fatalf("SCAN %s: %v", pattern, err)
	}
	return total
}
