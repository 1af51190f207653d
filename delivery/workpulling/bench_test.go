package workpulling_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// The work-pulling and sharding benchmarks run point to point
// (deliverytest.RunP2P) in the same run, on the same actor system, and
// report both and their ratio:
//
//	go test -run '^$' -bench 'WorkPulling|Sharding' -benchmem ./delivery/workpulling/ ./delivery/sharding/

// runWorkPulling sends n ints from a producer through a work-pulling
// producer controller to workers workers, and waits until they have all
// been confirmed.
func runWorkPulling(b *testing.B, sys *runtime.System, n, workers int) time.Duration {
	b.Helper()
	key := runtime.NewServiceKey[delivery.ConsumerCommand[int]](fmt.Sprint("bench-workers-", time.Now().UnixNano()))
	done := make(chan struct{})
	var total atomic.Int64
	var refs []runtime.AnyRef
	for range workers {
		cc, err := delivery.SpawnConsumerController[int](sys, "", delivery.ConsumerSettings{})
		if err != nil {
			b.Fatal(err)
		}
		consumer, err := runtime.Spawn(sys, "", deliverytest.CountingConsumer(b, sys, &total, int64(n), done))
		if err != nil {
			b.Fatal(err)
		}
		cc.Tell(delivery.ConsumerStart[int]{DeliverTo: consumer})
		runtime.Register(sys, key, cc)
		refs = append(refs, cc, consumer)
	}
	wp, err := workpulling.SpawnProducerController[int](sys, "", "bench-wp", key, workpulling.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	producer, err := runtime.Spawn(sys, "", sendInts(n))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	wp.Tell(workpulling.Start[int]{Producer: producer})
	<-done
	elapsed := time.Since(start)
	for _, ref := range append(refs, wp, producer) {
		sys.Stop(ref)
	}
	return elapsed
}

// BenchmarkWorkPulling: patternN small messages through a work-pulling
// producer controller to 1, 2 and 4 workers (window 50), against point to
// point on the same system.
func BenchmarkWorkPulling(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			sys := deliverytest.NewBenchSystem(b)
			var p2p, wp time.Duration
			runs := 0
			for b.Loop() {
				p2p += deliverytest.RunP2P(b, sys, deliverytest.P2pSpec{N: deliverytest.PatternN}).Elapsed
				wp += runWorkPulling(b, sys, deliverytest.PatternN, workers)
				runs++
			}
			deliverytest.ReportPattern(b, fmt.Sprintf("work pulling, %d workers", workers), deliverytest.PatternN, runs, wp, p2p)
		})
	}
}

// sendInts is a work-pulling producer that sends 1..n, one on each
// RequestNext, and nothing after.
func sendInts(n int) func() runtime.Behavior[workpulling.RequestNext[int]] {
	return func() runtime.Behavior[workpulling.RequestNext[int]] {
		sent := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[workpulling.RequestNext[int]], r workpulling.RequestNext[int]) {
			if sent < n {
				sent++
				r.SendNextTo.Tell(sent)
			}
		})
	}
}
