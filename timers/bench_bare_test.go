package timers

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// bareWorkers is how many calls the bare burst runs at once, as many as
// the scheduler's default workers.
const bareWorkers = DefaultWorkers

// bareBurst is the yardstick of the same-instant bursts: the same calls,
// fired the barest way go-redis allows, on the same Redis and through the
// same component client. The calls' JSON sits in a hash and their names
// in a sorted set by due time, written in pipelines; once due, one loop
// pops up to bareWorkers names at a time (ZPOPMIN: no lease, no attempt
// count, no generation, so at most once), reads and deletes their calls
// (HMGET and HDEL in one pipeline) and hands them to bareWorkers
// goroutines that decode each call and dispatch it. It returns how long
// after the due time the last call returned, and the CPU this process and
// Redis spent from the due time until then.
func bareBurst(b *testing.B, client redis.UniversalClient, d Dispatcher, calls []components.DeferredCall) (after, goCPU, redisCPU time.Duration) {
	ctx := context.Background()
	due, data := "bare:due", "bare:data"
	b.Cleanup(func() { client.Del(context.Background(), due, data) })
	pipe := client.Pipeline()
	names := make([]string, len(calls))
	for i, call := range calls {
		j, err := call.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		names[i] = "t-" + strconv.Itoa(i)
		pipe.HSet(ctx, data, names[i], j)
		if pipe.Len() >= 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	at := time.Now().Add(time.Second)
	members := make([]redis.Z, len(names))
	for i, name := range names {
		members[i] = redis.Z{Score: float64(at.UnixMilli()), Member: name}
	}
	if err := client.ZAdd(ctx, due, members...).Err(); err != nil {
		b.Fatal(err)
	}

	jobs := make(chan string, bareWorkers)
	var wg sync.WaitGroup
	for range bareWorkers {
		wg.Go(func() {
			for j := range jobs {
				call, err := components.UnmarshalDeferredCall([]byte(j))
				if err == nil {
					_, err = d.Dispatch(ctx, call)
				}
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	<-time.After(time.Until(at))
	info0, cpu0 := testenv.ReadRedisInfo(b, client), testenv.ProcessCPU()
	for {
		popped, err := client.ZPopMin(ctx, due, bareWorkers).Result()
		if err != nil {
			b.Fatal(err)
		}
		if len(popped) == 0 {
			break
		}
		batch := make([]string, len(popped))
		for i, z := range popped {
			batch[i] = z.Member.(string)
		}
		pipe := client.Pipeline()
		got := pipe.HMGet(ctx, data, batch...)
		pipe.HDel(ctx, data, batch...)
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		for _, v := range got.Val() {
			jobs <- v.(string)
		}
	}
	close(jobs)
	wg.Wait()
	after = time.Since(at)
	return after, testenv.ProcessCPU() - cpu0, testenv.ReadRedisInfo(b, client).CPU - info0.CPU
}
