package delivery

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/runtime"
)

// The work-pulling and sharding benchmarks run point to point (runP2P) in
// the same run, on the same actor system, and report both and their ratio:
//
//	go test -run '^$' -bench 'WorkPulling|Sharding' -benchmem ./delivery/

// patternN is how many messages one run of a pattern benchmark sends.
const patternN = 200_000

// countingConsumer spawns a consumer that confirms every Delivery and
// closes done when all of them together have had n.
func countingConsumer(b *testing.B, sys *runtime.System, total *atomic.Int64, n int64, done chan struct{}) func() runtime.Behavior[Delivery[int]] {
	return func() runtime.Behavior[Delivery[int]] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[Delivery[int]], d Delivery[int]) {
			d.Confirm()
			if total.Add(1) == n {
				close(done)
			}
		})
	}
}

// runWorkPulling sends n ints from a producer through a work-pulling
// producer controller to workers workers, and waits until they have all
// been confirmed.
func runWorkPulling(b *testing.B, sys *runtime.System, n, workers int) time.Duration {
	b.Helper()
	key := runtime.NewServiceKey[ConsumerCommand[int]](fmt.Sprint("bench-workers-", time.Now().UnixNano()))
	done := make(chan struct{})
	var total atomic.Int64
	var refs []runtime.AnyRef
	for range workers {
		cc, err := SpawnConsumerController[int](sys, "", ConsumerSettings{})
		if err != nil {
			b.Fatal(err)
		}
		consumer, err := runtime.Spawn(sys, "", countingConsumer(b, sys, &total, int64(n), done))
		if err != nil {
			b.Fatal(err)
		}
		cc.Tell(ConsumerStart[int]{DeliverTo: consumer})
		runtime.Register(sys, key, cc)
		refs = append(refs, cc, consumer)
	}
	wp, err := SpawnWorkPullingProducerController[int](sys, "", "bench-wp", key, WorkPullingSettings{})
	if err != nil {
		b.Fatal(err)
	}
	producer, err := runtime.Spawn(sys, "", func() runtime.Behavior[WorkPullingRequestNext[int]] {
		sent := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[WorkPullingRequestNext[int]], r WorkPullingRequestNext[int]) {
			if sent < n {
				sent++
				r.SendNextTo.Tell(sent)
			}
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	wp.Tell(WorkPullingStart[int]{Producer: producer})
	<-done
	elapsed := time.Since(start)
	for _, ref := range append(refs, wp, producer) {
		sys.Stop(ref)
	}
	return elapsed
}

// runSharding sends n ints from a producer through a sharding producer
// controller to entities entities, round robin, and waits until they have
// all been confirmed.
func runSharding(b *testing.B, sys *runtime.System, n, entities int) time.Duration {
	b.Helper()
	done := make(chan struct{})
	var total atomic.Int64
	create, err := NewShardingConsumerController(func(_ string, start runtime.Ref[ConsumerStart[int]]) runtime.Behavior[Delivery[int]] {
		count := countingConsumer(b, sys, &total, int64(n), done)()
		return runtime.Funcs[Delivery[int]]{
			Message: count.Receive,
			Signal: func(ctx *runtime.Context[Delivery[int]], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					start.Tell(ConsumerStart[int]{DeliverTo: ctx.Self()})
				}
			},
		}
	}, ShardingConsumerSettings{})
	if err != nil {
		b.Fatal(err)
	}
	key := runtime.NewEntityTypeKey[ConsumerCommand[int]](fmt.Sprint("bench-entities-", time.Now().UnixNano()))
	region, err := runtime.InitSharding(sys, runtime.Entity[ConsumerCommand[int]]{Key: key, Create: create})
	if err != nil {
		b.Fatal(err)
	}
	sp, err := SpawnShardingProducerController[int](sys, "", "bench-sp", region, ShardingSettings{})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, entities)
	for i := range ids {
		ids[i] = fmt.Sprint("e", i)
	}
	producer, err := runtime.Spawn(sys, "", func() runtime.Behavior[ShardingRequestNext[int]] {
		sent := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[ShardingRequestNext[int]], r ShardingRequestNext[int]) {
			if sent < n {
				sent++
				r.SendNextTo.Tell(ShardingEnvelope[int]{EntityID: ids[sent%entities], Message: sent})
			}
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	sp.Tell(ShardingStart[int]{Producer: producer})
	<-done
	elapsed := time.Since(start)
	sys.Stop(sp)
	sys.Stop(producer)
	return elapsed
}

// reportPattern reports a pattern's throughput against point to point's.
func reportPattern(b *testing.B, what string, n, runs int, pattern, p2p time.Duration) {
	msgs := float64(n * runs)
	rate, p2pRate := msgs/pattern.Seconds(), msgs/p2p.Seconds()
	b.ReportMetric(rate, "msgs/s")
	b.ReportMetric(p2pRate, "p2p-msgs/s")
	b.ReportMetric(rate/p2pRate, "x-p2p")
	b.ReportMetric(float64(pattern.Nanoseconds())/msgs, "ns/msg")
	b.Logf("%s: %.0f msgs/s; point to point %.0f msgs/s in the same run; ratio %.2f (n=%d x %d)", what, rate, p2pRate, rate/p2pRate, n, runs)
}

// BenchmarkWorkPulling: patternN small messages through a work-pulling
// producer controller to 1, 2 and 4 workers (window 50), against point to
// point on the same system.
func BenchmarkWorkPulling(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			sys := newBenchSystem(b)
			var p2p, wp time.Duration
			runs := 0
			for b.Loop() {
				p2p += runP2P(b, sys, p2pSpec{n: patternN}).elapsed
				wp += runWorkPulling(b, sys, patternN, workers)
				runs++
			}
			reportPattern(b, fmt.Sprintf("work pulling, %d workers", workers), patternN, runs, wp, p2p)
		})
	}
}

// BenchmarkSharding: patternN small messages through a sharding producer
// controller to 100 entities, round robin (window 50 each), against point
// to point on the same system.
func BenchmarkSharding(b *testing.B) {
	b.Run("entities=100", func(b *testing.B) {
		sys := newBenchSystem(b)
		var p2p, sh time.Duration
		runs := 0
		for b.Loop() {
			p2p += runP2P(b, sys, p2pSpec{n: patternN}).elapsed
			sh += runSharding(b, sys, patternN, 100)
			runs++
		}
		reportPattern(b, "sharding, 100 entities", patternN, runs, sh, p2p)
	})
}
