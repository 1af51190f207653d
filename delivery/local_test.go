package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"

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
				pc.Tell(ProducerStart[job]{Producer: newProbe[RequestNext[job]](t, other, "producer").Ref})
				return pc
			}},
		{name: "producer controller, ask reply address as producer", want: "ProducerStart.Producer /temp/ask:",
			start: func(t *testing.T, sys, _ *runtime.System) runtime.AnyRef {
				pc := spawnPC(t, sys)
				askInBackground(t, pc, func(r runtime.Ref[RequestNext[job]]) ProducerCommand[job] {
					return ProducerStart[job]{Producer: r}
				})
				return pc
			}},
		{name: "consumer controller, consumer of another system", want: "ConsumerStart.DeliverTo /user/consumer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				cc, err := SpawnConsumerController[job](sys, "cc", ConsumerSettings{})
				if err != nil {
					t.Fatal(err)
				}
				cc.Tell(ConsumerStart[job]{DeliverTo: newProbe[Delivery[job]](t, other, "consumer").Ref})
				return cc
			}},
		{name: "work-pulling producer controller, producer of another system", want: "WorkPullingStart.Producer /user/producer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
				wp := spawnWP(t, sys, "wp", key, WorkPullingSettings{})
				wp.Tell(WorkPullingStart[job]{Producer: newProbe[WorkPullingRequestNext[job]](t, other, "producer").Ref})
				return wp
			}},
		{name: "sharding producer controller, producer of another system", want: "ShardingStart.Producer /user/producer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				region := startRegion(t, sys, regionSpec{}, newCollectorAll(1))
				sp := spawnSP(t, sys, "sp", region, ShardingSettings{})
				sp.Tell(ShardingStart[job]{Producer: newProbe[ShardingRequestNext[job]](t, other, "producer").Ref})
				return sp
			}},
		{name: "sharded entity, consumer of another system", want: "ConsumerStart.DeliverTo /user/consumer:",
			start: func(t *testing.T, sys, other *runtime.System) runtime.AnyRef {
				far := newProbe[Delivery[job]](t, other, "consumer")
				create, err := NewShardingConsumerController(func(_ string, start runtime.Ref[ConsumerStart[job]]) runtime.Behavior[consMsg] {
					return runtime.Funcs[consMsg]{Signal: func(_ *runtime.Context[consMsg], s runtime.Signal) {
						if _, ok := s.(runtime.Started); ok {
							start.Tell(ConsumerStart[job]{DeliverTo: far.Ref})
						}
					}}
				}, ShardingConsumerSettings{})
				if err != nil {
					t.Fatal(err)
				}
				entity, err := runtime.Spawn(sys, "entity", func() runtime.Behavior[ConsumerCommand[job]] { return create("e1") })
				if err != nil {
					t.Fatal(err)
				}
				return entity
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, logs := newSystem(t)
			other, _ := newSystem(t)
			w := newWatcher(t, sys)
			stops := tc.start(t, sys, other)
			w.watch(stops)
			w.expectStopped(t, stops.Path())
			err := logs.loggedError(ErrNotLocal)
			if err == nil {
				t.Fatalf("no error wrapping ErrNotLocal in the log:\n%s", logs.tail(5))
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
func spawnPC(t *testing.T, sys *runtime.System) runtime.Ref[ProducerCommand[job]] {
	t.Helper()
	pc, err := SpawnProducerController[job](sys, "pc", "p", ProducerSettings{})
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
