package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/runtime"
)

// TestNilArgumentsAreErrors: a nil or typed-nil argument is an error from
// the constructor that names it, never a panic later.
func TestNilArgumentsAreErrors(t *testing.T) {
	sys, _ := newSystem(t)
	var nilMemory *durable.Memory[job]
	var nilSharding *runtime.Sharding[ConsumerCommand[job]]
	var nilSystem *runtime.System
	key := runtime.NewServiceKey[ConsumerCommand[job]]("nil-args")
	region, err := runtime.InitSharding(sys, runtime.Entity[ConsumerCommand[job]]{Key: runtime.NewEntityTypeKey[ConsumerCommand[job]]("nil-args"),
		Create: func(string) runtime.Behavior[ConsumerCommand[job]] {
			return runtime.ReceiveFunc(func(*runtime.Context[ConsumerCommand[job]], ConsumerCommand[job]) {})
		}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string       // what is nil
		spawn func() error // the constructor call with it
		want  string       // what the error must say
	}{
		{"spawner of a producer controller", func() error {
			_, err := SpawnProducerController[job](nil, "pc", "p", ProducerSettings{})
			return err
		}, "spawner is nil"},
		{"typed-nil spawner of a producer controller", func() error {
			_, err := SpawnProducerController[job](nilSystem, "pc", "p", ProducerSettings{})
			return err
		}, "spawner is nil"},
		{"spawner of a consumer controller", func() error {
			_, err := SpawnConsumerController[job](nil, "cc", ConsumerSettings{})
			return err
		}, "spawner is nil"},
		{"spawner of a work-pulling controller", func() error {
			_, err := SpawnWorkPullingProducerController[job](nil, "wp", "p", key, WorkPullingSettings{})
			return err
		}, "spawner is nil"},
		{"spawner of a sharding controller", func() error {
			_, err := SpawnShardingProducerController[job](nil, "sp", "p", region, ShardingSettings{})
			return err
		}, "spawner is nil"},
		{"typed-nil *durable.Memory", func() error {
			_, err := SpawnProducerController[job](sys, "pc-nil-memory", "p", ProducerSettings{}, WithDurableQueue[job](nilMemory))
			return err
		}, "durable queue is nil"},
		{"untyped nil durable queue", func() error {
			_, err := SpawnProducerController[job](sys, "pc-nil-queue", "p", ProducerSettings{}, WithDurableQueue[job](nil))
			return err
		}, "durable queue is nil"},
		{"typed-nil *durable.Memory of work pulling", func() error {
			_, err := SpawnWorkPullingProducerController[job](sys, "wp-nil-memory", "p", key, WorkPullingSettings{}, WithDurableQueue[job](nilMemory))
			return err
		}, "durable queue is nil"},
		{"typed-nil *runtime.Sharding", func() error {
			_, err := SpawnShardingProducerController[job](sys, "sp-nil-region", "p", nilSharding, ShardingSettings{})
			return err
		}, "entity region is nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spawn()
			if !errors.Is(err, ErrInvalidSettings) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one wrapping ErrInvalidSettings that says %q", err, tc.want)
			}
		})
	}
}

// TestNilPointerMessagesAreIgnored: a nil *Ack to a producer controller
// and a nil *SequencedMessage to a consumer controller are dropped; both
// go on working.
func TestNilPointerMessagesAreIgnored(t *testing.T) {
	t.Run("nil *Ack", func(t *testing.T) {
		h := newPC(t, ProducerSettings{})
		h.start()
		r := h.expectRequestNext(t, 1, 0)
		h.pc.Tell((*Ack[job])(nil))
		r.SendNextTo.Tell(job{N: 1})
		h.expectSeq(t, 1, true)
		h.request(0, 2)
		h.expectRequestNext(t, 2, 0)
	})
	t.Run("nil *SequencedMessage", func(t *testing.T) {
		h := newCC(t, ConsumerSettings{FlowControlWindow: 10})
		h.cc.Tell((*SequencedMessage[job])(nil))
		h.send(1, true, incA)
		h.expectRequest(t, 0, 10, false)
		h.expectDelivery(t, 1)
	})
}

// panickingQueue panics in the calls its panics set names.
type panickingQueue struct {
	durable.Queue[job]
	panics map[string]bool
}

func (q panickingQueue) LoadState(ctx context.Context) (durable.State[job], error) {
	if q.panics["load"] {
		panic("load state exploded")
	}
	return q.Queue.LoadState(ctx)
}

func (q panickingQueue) StoreMessageSent(ctx context.Context, m durable.MessageSent[job]) error {
	if q.panics["sent"] {
		panic("store exploded")
	}
	return q.Queue.StoreMessageSent(ctx, m)
}

// TestPanickingQueueFailsTheController: a durable queue that panics stops
// its controller with an error that says so; the process lives on.
func TestPanickingQueueFailsTheController(t *testing.T) {
	for _, call := range []string{"load", "sent"} {
		t.Run(call, func(t *testing.T) {
			h := newPC(t, ProducerSettings{}, WithDurableQueue[job](panickingQueue{Queue: durable.NewMemory[job](), panics: map[string]bool{call: true}}))
			h.start()
			if call == "sent" {
				r := h.expectRequestNext(t, 1, 0)
				r.SendNextTo.Tell(job{N: 1})
			}
			h.watcher.expectStopped(t, h.pc.Path())
			err := h.logs.loggedError(durablecalls.ErrQueuePanicked)
			if err == nil || !strings.Contains(err.Error(), "exploded") {
				t.Fatalf("logged error %v, want one that the queue panicked, with its value", err)
			}
		})
	}
}
