package workpulling_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// TestRemoteWorkers: the workers of a work-pulling producer controller run
// on two other instances and register with their own receptionists, made
// cluster-wide by a directory in Redis; the producer controller sees them
// all. One worker instance is killed mid-stream (its connections reset,
// its directory entries left to lapse): the producer controller drops its
// worker once the lease lapses and hands what it had not confirmed to the
// other. Every job arrives; the jobs that came twice are at most the dead
// worker's window.
func TestRemoteWorkers(t *testing.T) {
	testenv.Long(t)
	const jobs, window, lease = 600, 20, 600 * time.Millisecond
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 5))
	rdb := testenv.Redis(t)
	space := keyspace.Must("wp-remote-" + uuid.NewString()[:8])
	cfg := remotetest.Config{Directory: &remotetest.Directory{Client: rdb, Space: space, Lease: lease}}
	a := remotetest.NewNodeWith(t, "producer-side", cfg)
	b, c := remotetest.NewNodeWith(t, "workers-1", cfg), remotetest.NewNodeWith(t, "workers-2", cfg)
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("remote-workers")
	col := deliverytest.NewCollectorAll(jobs)
	settings := delivery.ConsumerSettings{FlowControlWindow: window, ResendIntervalMin: 20 * time.Millisecond, ResendIntervalMax: 200 * time.Millisecond}
	for _, n := range []*remotetest.Node{b, c} {
		deliverytest.SpawnWorker(t, n.Sys, "worker", key, deliverytest.WorkerSpec{Consumer: settings}, col)
	}
	wp, err := workpulling.SpawnProducerController[deliverytest.Job](a.Sys, "wp", "remote", key, workpulling.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	deliverytest.Eventually(t, "two workers seen across instances", func() bool {
		s, err := runtime.Ask(context.Background(), wp, func(r runtime.Ref[workpulling.WorkerStats]) workpulling.Command[deliverytest.Job] {
			return workpulling.GetWorkerStats[deliverytest.Job]{ReplyTo: r}
		})
		return err == nil && s.NumberOfWorkers == 2
	})
	pace := rand.New(rand.NewPCG(seed, 6))
	deliverytest.SpawnProducer(t, a.Sys, "producer", nil, deliverytest.ProducerSpec{Limit: jobs, Connect: deliverytest.WorkPullingConnect(wp),
		Delay: func() time.Duration { return time.Duration(pace.IntN(2)) * time.Millisecond }})

	killAt := 50 + rng.IntN(jobs/3)
	deliverytest.Eventually(t, fmt.Sprintf("%d jobs delivered", killAt), func() bool { return col.Count() >= killAt })
	c.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	twice := col.Count() - jobs
	if twice > window {
		t.Fatalf("seed %d: %d jobs came twice: more than the dead worker's window, %d", seed, twice, window)
	}
	t.Logf("seed %d: killed a worker instance after %d deliveries; %d jobs, %d twice (at most %d)", seed, killAt, jobs, twice, window)
}
