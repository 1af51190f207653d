package delivery_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/runtime"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestRemoteConsumerInstanceKilled: the consumer's instance dies mid-stream
// (its connections reset, its transport gone, as kill -9 looks to the
// others); a consumer controller on a third instance registers with the
// producer controller and gets the rest. Nothing is lost, each consumer
// gets its jobs in order, and the jobs both got are at most the window:
// the bound docs/delivery.md gives.
func TestRemoteConsumerInstanceKilled(t *testing.T) {
	testenv.Long(t)
	const jobs, window = 600, 20
	for _, seed := range deliverytest.RemoteSeeds() {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			a := remotetest.NewNode(t, "producer-side", nil)
			b, c := remotetest.NewNode(t, "consumer-1", nil), remotetest.NewNode(t, "consumer-2", nil)
			pc, err := delivery.SpawnProducerController[job](a.Sys, "pc", "killed", delivery.ProducerSettings{ResendFirstInterval: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			at, err := runtime.Expose(a.Sys, pc)
			if err != nil {
				t.Fatal(err)
			}
			settings := delivery.ConsumerSettings{FlowControlWindow: window, ResendIntervalMin: 20 * time.Millisecond, ResendIntervalMax: 200 * time.Millisecond}
			consume := func(n *remotetest.Node, col *deliverytest.Collector) {
				cc, err := delivery.SpawnConsumerController[job](n.Sys, "cc", settings)
				if err != nil {
					t.Fatal(err)
				}
				deliverytest.SpawnConsumer(t, n.Sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
				cc.Tell(delivery.RegisterToProducerController[job]{
					ProducerController: runtime.RemoteRef[delivery.ProducerCommand[job]](n.Sys, at.Addr, at.Path)})
			}
			first, second := deliverytest.NewCollector(jobs), deliverytest.NewCollector(jobs)
			consume(b, first)
			pace := rand.New(rand.NewPCG(seed, 4))
			deliverytest.SpawnProducer(t, a.Sys, "producer", pc, deliverytest.ProducerSpec{Limit: jobs,
				Delay: func() time.Duration { return time.Duration(pace.IntN(2)) * time.Millisecond }})

			killAt := 50 + rng.IntN(jobs/2)
			deliverytest.Eventually(t, fmt.Sprintf("%d jobs on the first consumer", killAt), func() bool { return first.Count() >= killAt })
			b.Kill()
			consume(c, second)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := second.Wait(ctx); err != nil {
				t.Fatalf("second consumer: %v", err)
			}

			one, two := first.Jobs(), second.Jobs()
			for _, got := range [][]int{one, two} {
				for i := 1; i < len(got); i++ {
					if got[i] != got[i-1]+1 {
						t.Fatalf("job %d after job %d", got[i], got[i-1])
					}
				}
			}
			if len(one) == 0 || len(two) == 0 || two[0] > one[len(one)-1]+1 || two[len(two)-1] != jobs {
				t.Fatalf("jobs lost: the first consumer got %v..., the second from %v", one[:min(1, len(one))], two[:min(1, len(two))])
			}
			twice := one[len(one)-1] - two[0] + 1
			if twice > window {
				t.Fatalf("%d jobs delivered to both consumers: more than the window, %d", twice, window)
			}
			t.Logf("seed %d: killed after %d jobs; the second consumer got %d..%d; %d jobs twice (at most %d)",
				seed, len(one), two[0], jobs, max(twice, 0), window)
		})
	}
}
