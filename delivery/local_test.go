package delivery_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// TestNotLocal: a controller given a producer or consumer that is not local
// to it (an actor of another System in the same process, or an ask's reply
// address) stops, logging an error that wraps ErrNotLocal and says what was
// wrong and what is required. The local case is what every other test runs.
func TestNotLocal(t *testing.T) {
	cases := []struct {
		name string // the controller and what it is given
		// start spawns the controller on sys, sends it a Start whose ref is
		// an actor of other (or no actor), and returns the actor that must
		// stop: the controller, or the sharded entity.
		start func(t *testing.T, sys, other *runtime.System) runtime.AnyRef
		want  string // the field the error names
	}{
		{name: "producer controller, producer of another system", want: "ProducerStart.Producer /user/producer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				pc := spawnPC(t, sys)
				pc.Tell(delivery.ProducerStart[deliverytest.Job]{Producer: deliverytest.NewProbe[delivery.RequestNext[deliverytest.Job]](t, other, "producer").Ref})
				return pc
			}},
		{name: "producer controller, ask reply address as producer", want: "ProducerStart.Producer /temp/ask:",
			start: func(t *testing.T, sys, _ *runtime.System) runtime.AnyRef {
				pc := spawnPC(t, sys)
				askInBackground(t, pc, func(r runtime.Ref[delivery.RequestNext[deliverytest.Job]]) delivery.ProducerCommand[deliverytest.Job] {
					return delivery.ProducerStart[deliverytest.Job]{Producer: r}
				})
				return pc
			}},
		{name: "consumer controller, consumer of another system", want: "ConsumerStart.DeliverTo /user/consumer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", delivery.ConsumerSettings{})
				if err != nil {
					t.Fatal(err)
				}
				cc.Tell(delivery.ConsumerStart[deliverytest.Job]{DeliverTo: deliverytest.NewProbe[delivery.Delivery[deliverytest.Job]](t, other, "consumer").Ref})
				return cc
			}},
		{name: "work-pulling producer controller, producer of another system", want: "workpulling.Start.Producer /user/producer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
				wp := deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{})
				wp.Tell(workpulling.Start[deliverytest.Job]{Producer: deliverytest.NewProbe[workpulling.RequestNext[deliverytest.Job]](t, other, "producer").Ref})
				return wp
			}},
		{name: "sharding producer controller, producer of another system", want: "sharding.Start.Producer /user/producer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				region := deliverytest.StartRegion(t, sys, deliverytest.RegionSpec{}, deliverytest.NewCollectorAll(1))
				sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{})
				sp.Tell(sharding.Start[deliverytest.Job]{Producer: deliverytest.NewProbe[sharding.RequestNext[deliverytest.Job]](t, other, "producer").Ref})
				return sp
			}},
		{name: "sharded entity, consumer of another system", want: "ConsumerStart.DeliverTo /user/consumer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				far := deliverytest.NewProbe[delivery.Delivery[deliverytest.Job]](t, other, "consumer")
				create, err := sharding.NewConsumerController(func(_ string, start runtime.Ref[delivery.ConsumerStart[deliverytest.Job]]) runtime.Behavior[deliverytest.ConsMsg] {
					return runtime.Funcs[deliverytest.ConsMsg]{Signal: func(_ *runtime.Context[deliverytest.ConsMsg], s runtime.Signal) {
						if _, ok := s.(runtime.Started); ok {
							start.Tell(delivery.ConsumerStart[deliverytest.Job]{DeliverTo: far.Ref})
						}
					}}
				}, sharding.ConsumerSettings{})
				if err != nil {
					t.Fatal(err)
				}
				entity, err := runtime.Spawn(sys, "entity", func() runtime.Behavior[delivery.ConsumerCommand[deliverytest.Job]] { return create("e1") })
				if err != nil {
					t.Fatal(err)
				}
				return entity
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, logs := deliverytest.NewSystem(t)
			other, _ := deliverytest.NewSystem(t)
			w := deliverytest.NewWatcher(t, sys)
			stops := tc.start(t, sys, other)
			w.Watch(stops)
			w.ExpectStopped(t, stops.Path())
			err := logs.LoggedError(delivery.ErrNotLocal)
			if err == nil {
				t.Fatalf("no error wrapping ErrNotLocal in the log:\n%s", logs.Tail(5))
			}
			for _, want := range []string{tc.want, "must be an actor of the", "or a message adapter of one"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q: no %q", err, want)
				}
			}
		})
	}
}

// spawnPC spawns a producer controller named pc, producer id p.
func spawnPC(t *testing.T, sys *runtime.System) runtime.Ref[delivery.ProducerCommand[deliverytest.Job]] {
	t.Helper()
	pc, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc", "p", delivery.ProducerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// askInBackground sends to what build makes for the reply address of an
// Ask from plain Go code, and gives up on the reply when the test ends.
func askInBackground[Req, Resp any](t *testing.T, to runtime.Ref[Req], build func(runtime.Ref[Resp]) Req) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := runtime.Ask(ctx, to, build)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, runtime.ErrAskTimeout) {
			t.Errorf("ask: %v, want it given up", err)
		}
	})
}
