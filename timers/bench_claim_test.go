package timers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// BenchmarkRedisClaimComplete is the store's side of a same-instant burst
// alone: 20,000 timers with a 1 KB argument, all due, claimed 128 at a
// time and each batch completed, with no worker, no call and no reporter
// in between. It reports this process's and Redis's CPU per timer and the
// wall time per timer of the claim-and-complete loop.
func BenchmarkRedisClaimComplete(b *testing.B) {
	const n, batch = 20000, 128
	srv := testenv.StartRedisServer(b)
	client, admin := srv.Client(b), srv.Client(b)
	raw := make([]byte, 800)
	_, _ = rand.Read(raw)
	arg := base64.StdEncoding.EncodeToString(raw)[:1022]
	var goCPU, redisCPU, wall time.Duration
	for range b.N {
		store := NewRedisStore(client, "bench-"+rand.Text())
		if _, err := store.open(context.Background()); err != nil {
			b.Fatal(err)
		}
		s := newScheduler(b, store, newBenchAction(b, false, nil), Config{})
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					if _, err := s.Create(context.Background(), "t-"+strconv.Itoa(i), 0, benchCall(b, false, i, arg)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		time.Sleep(2 * time.Millisecond) // those created in the last millisecond become due in the next

		info0, cpu0, start := testenv.ReadRedisInfo(b, admin), testenv.ProcessCPU(), time.Now()
		for done := 0; done < n; {
			got, err := store.claim(context.Background(), batch, DefaultLease)
			if err != nil || len(got.timers) == 0 {
				b.Fatalf("claim after %d of %d: %d timers, %v", done, n, len(got.timers), err)
			}
			fs := make([]Firing, len(got.timers))
			for i, t := range got.timers {
				fs[i] = firingOf(t)
			}
			ok, err := store.complete(context.Background(), fs)
			if err != nil || len(ok) != len(fs) {
				b.Fatalf("complete: %v", err)
			}
			done += len(fs)
		}
		wall += time.Since(start)
		goCPU += testenv.ProcessCPU() - cpu0
		info1 := testenv.ReadRedisInfo(b, admin)
		redisCPU += info1.CPU - info0.CPU
		b.Logf("Redis: %s", info1.CommandsSince(info0))
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N*n) }
	b.ReportMetric(per(goCPU), "go-cpu-us/timer")
	b.ReportMetric(per(redisCPU), "redis-cpu-us/timer")
	b.ReportMetric(per(wall), "wall-us/timer")
}
