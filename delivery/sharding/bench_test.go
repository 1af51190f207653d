package sharding_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/runtime"
)

// runSharding sends n ints from a producer through a sharding producer
// controller to entities entities, round robin, and waits until they have
// all been confirmed.
func runSharding(b *testing.B, sys *runtime.System, n, entities int) time.Duration {
	b.Helper()
	done := make(chan struct{})
	var total atomic.Int64
	create, err := sharding.NewConsumerController(func(_ string, start runtime.Ref[delivery.ConsumerStart[int]]) runtime.Behavior[delivery.Delivery[int]] {
		count := deliverytest.CountingConsumer(b, sys, &total, int64(n), done)()
		return runtime.Funcs[delivery.Delivery[int]]{
			Message: count.Receive,
			Signal: func(ctx *runtime.Context[delivery.Delivery[int]], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					start.Tell(delivery.ConsumerStart[int]{DeliverTo: ctx.Self()})
				}
			},
		}
	}, sharding.ConsumerSettings{})
	if err != nil {
		b.Fatal(err)
	}
	key := runtime.NewEntityTypeKey[delivery.ConsumerCommand[int]](fmt.Sprint("bench-entities-", time.Now().UnixNano()))
	region, err := runtime.InitSharding(sys, runtime.Entity[delivery.ConsumerCommand[int]]{Key: key, Create: create})
	if err != nil {
		b.Fatal(err)
	}
	sp, err := sharding.SpawnProducerController[int](sys, "", "bench-sp", region, sharding.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, entities)
	for i := range ids {
		ids[i] = fmt.Sprint("e", i)
	}
	producer, err := runtime.Spawn(sys, "", func() runtime.Behavior[sharding.RequestNext[int]] {
		sent := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[sharding.RequestNext[int]], r sharding.RequestNext[int]) {
			if sent < n {
				sent++
				r.SendNextTo.Tell(sharding.Envelope[int]{EntityID: ids[sent%entities], Message: sent})
			}
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	sp.Tell(sharding.Start[int]{Producer: producer})
	<-done
	elapsed := time.Since(start)
	sys.Stop(sp)
	sys.Stop(producer)
	return elapsed
}

// BenchmarkSharding: patternN small messages through a sharding producer
// controller to 100 entities, round robin (window 50 each), against point
// to point on the same system.
func BenchmarkSharding(b *testing.B) {
	b.Run("entities=100", func(b *testing.B) {
		sys := deliverytest.NewBenchSystem(b)
		var p2p, sh time.Duration
		runs := 0
		for b.Loop() {
			p2p += deliverytest.RunP2P(b, sys, deliverytest.P2pSpec{N: deliverytest.PatternN}).Elapsed
			sh += runSharding(b, sys, deliverytest.PatternN, 100)
			runs++
		}
		deliverytest.ReportPattern(b, "sharding, 100 entities", deliverytest.PatternN, runs, sh, p2p)
	})
}
