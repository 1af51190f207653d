package workpulling_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// Job is the message of the example.
type Job struct{ ID int }

// quiet keeps the controllers' logs (dead letters at shutdown, say) out of
// the example's output.
var quiet = runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// Work pulling: workers register their consumer controllers with the
// receptionist, and each job goes to one of them that has demand. Which
// worker gets which job is not deterministic; that every job is processed
// once is.
func ExampleSpawnProducerController() {
	const jobs, workers = 10, 2
	sys := runtime.NewSystem("work-pulling", quiet)
	defer sys.Shutdown(context.Background())

	key := runtime.NewServiceKey[delivery.ConsumerCommand[Job]]("jobs-workers")
	var processed atomic.Int32
	done := make(chan struct{})
	for i := range workers {
		cc, err := delivery.SpawnConsumerController[Job](sys, fmt.Sprintf("worker%d-cc", i), delivery.ConsumerSettings{})
		if err != nil {
			fmt.Println(err)
			return
		}
		worker, err := runtime.Spawn(sys, fmt.Sprintf("worker%d", i), func() runtime.Behavior[delivery.Delivery[Job]] {
			return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.Delivery[Job]], d delivery.Delivery[Job]) {
				d.Confirm()
				if processed.Add(1) == jobs {
					close(done)
				}
			})
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		cc.Tell(delivery.ConsumerStart[Job]{DeliverTo: worker})
		// Registering is joining; deregistering or stopping is leaving,
		// and what the worker left unconfirmed goes to another worker.
		runtime.Register(sys, key, cc)
	}

	wp, err := workpulling.SpawnProducerController[Job](sys, "jobs-wp", "jobs", key, workpulling.Settings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	producer, err := runtime.Spawn(sys, "producer", func() runtime.Behavior[workpulling.RequestNext[Job]] {
		sent := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[workpulling.RequestNext[Job]], next workpulling.RequestNext[Job]) {
			if sent < jobs {
				sent++
				next.SendNextTo.Tell(Job{ID: sent})
			}
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	wp.Tell(workpulling.Start[Job]{Producer: producer})

	select {
	case <-done:
		fmt.Println("processed", processed.Load(), "jobs")
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output:
	// processed 10 jobs
}
