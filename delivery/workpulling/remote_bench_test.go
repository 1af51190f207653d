package workpulling_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// BenchmarkRemoteWorkPulling measures work pulling with a worker on each
// of three instances and the producer on a fourth, over the real transport
// on loopback, the receptionist made cluster-wide by a directory in Redis;
// in the same run, the same with the three workers on the producer's
// instance. Window 50 per worker.
//
//	go test -run '^$' -bench RemoteWorkPulling -benchtime=200000x ./delivery/workpulling/
func BenchmarkRemoteWorkPulling(b *testing.B) {
	n := max(b.N, 1000)
	rdb := testenv.Redis(b)
	space := keyspace.Must("wp-bench-" + uuid.NewString()[:8])
	nodes := make([]*remotetest.Node, 4)
	for i := range nodes {
		nodes[i] = remotetest.NewNodeWith(b, "instance", remotetest.Config{Direct: true,
			Directory: &remotetest.Directory{Client: rdb, Space: space, Lease: 3 * time.Second}})
	}
	spread := runRemoteWorkPulling(b, nodes[0], nodes[1:], "spread", n)
	local := runRemoteWorkPulling(b, nodes[0], []*remotetest.Node{nodes[0], nodes[0], nodes[0]}, "local", n)
	b.ReportMetric(float64(n)/spread.Seconds(), "msgs/s")
	b.ReportMetric(float64(n)/local.Seconds(), "one-instance-msgs/s")
}

// runRemoteWorkPulling runs a worker on each of workers and the producer on
// at, and sends n ints.
func runRemoteWorkPulling(b *testing.B, at *remotetest.Node, workers []*remotetest.Node, name string, n int) time.Duration {
	key := runtime.NewServiceKey[delivery.ConsumerCommand[int]]("bench-" + name)
	done := make(chan struct{})
	var total atomic.Int64
	for _, node := range workers {
		cc, err := delivery.SpawnConsumerController[int](node.Sys, "", delivery.ConsumerSettings{FlowControlWindow: 50})
		if err != nil {
			b.Fatal(err)
		}
		consumer, err := runtime.Spawn(node.Sys, "", deliverytest.CountingConsumer(b, node.Sys, &total, int64(n), done))
		if err != nil {
			b.Fatal(err)
		}
		cc.Tell(delivery.ConsumerStart[int]{DeliverTo: consumer})
		runtime.Register(node.Sys, key, cc)
	}
	sys := at.Sys
	wp, err := workpulling.SpawnProducerController[int](sys, "", "bench-"+name, key, workpulling.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	deliverytest.Eventually(b, "every worker listed", func() bool {
		s, err := runtime.Ask(context.Background(), wp, func(r runtime.Ref[workpulling.WorkerStats]) workpulling.Command[int] {
			return workpulling.GetWorkerStats[int]{ReplyTo: r}
		})
		return err == nil && s.NumberOfWorkers == len(workers)
	})
	producer, err := runtime.Spawn(sys, "", sendInts(n))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	wp.Tell(workpulling.Start[int]{Producer: producer})
	<-done
	return time.Since(start)
}
