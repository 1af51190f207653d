package delivery_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// TestNilArgumentsAreErrors: a nil or typed-nil argument is an error from
// the constructor that names it, never a panic later.
func TestNilArgumentsAreErrors(t *testing.T) {
	sys, _ := deliverytest.NewSystem(t)
	var nilMemory *durable.Memory[deliverytest.Job]
	var nilSharding *runtime.Sharding[delivery.ConsumerCommand[deliverytest.Job]]
	var nilSystem *runtime.System
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("nil-args")
	region, err := runtime.InitSharding(sys, runtime.Entity[delivery.ConsumerCommand[deliverytest.Job]]{Key: runtime.NewEntityTypeKey[delivery.ConsumerCommand[deliverytest.Job]]("nil-args"),
		Create: func(string) runtime.Behavior[delivery.ConsumerCommand[deliverytest.Job]] {
			return runtime.ReceiveFunc(func(*runtime.Context[delivery.ConsumerCommand[deliverytest.Job]], delivery.ConsumerCommand[deliverytest.Job]) {
			})
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
			_, err := delivery.SpawnProducerController[deliverytest.Job](nil, "pc", "p", delivery.ProducerSettings{})
			return err
		}, "spawner is nil"},
		{"typed-nil spawner of a producer controller", func() error {
			_, err := delivery.SpawnProducerController[deliverytest.Job](nilSystem, "pc", "p", delivery.ProducerSettings{})
			return err
		}, "spawner is nil"},
		{"spawner of a consumer controller", func() error {
			_, err := delivery.SpawnConsumerController[deliverytest.Job](nil, "cc", delivery.ConsumerSettings{})
			return err
		}, "spawner is nil"},
		{"spawner of a work-pulling controller", func() error {
			_, err := workpulling.SpawnProducerController[deliverytest.Job](nil, "wp", "p", key, workpulling.Settings{})
			return err
		}, "spawner is nil"},
		{"spawner of a sharding controller", func() error {
			_, err := sharding.SpawnProducerController[deliverytest.Job](nil, "sp", "p", region, sharding.Settings{})
			return err
		}, "spawner is nil"},
		{"typed-nil *durable.Memory", func() error {
			_, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc-nil-memory", "p", delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](nilMemory))
			return err
		}, "durable queue is nil"},
		{"untyped nil durable queue", func() error {
			_, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc-nil-queue", "p", delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](nil))
			return err
		}, "durable queue is nil"},
		{"typed-nil *durable.Memory of work pulling", func() error {
			_, err := workpulling.SpawnProducerController[deliverytest.Job](sys, "wp-nil-memory", "p", key, workpulling.Settings{}, delivery.WithDurableQueue[deliverytest.Job](nilMemory))
			return err
		}, "durable queue is nil"},
		{"typed-nil *runtime.Sharding", func() error {
			_, err := sharding.SpawnProducerController[deliverytest.Job](sys, "sp-nil-region", "p", nilSharding, sharding.Settings{})
			return err
		}, "entity region is nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spawn()
			if !errors.Is(err, delivery.ErrInvalidSettings) || !strings.Contains(err.Error(), tc.want) {
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
		h := newPC(t, delivery.ProducerSettings{})
		h.start()
		r := h.expectRequestNext(t, 1, 0)
		h.pc.Tell((*delivery.Ack[deliverytest.Job])(nil))
		r.SendNextTo.Tell(deliverytest.Job{N: 1})
		h.expectSeq(t, 1, true)
		h.request(0, 2)
		h.expectRequestNext(t, 2, 0)
	})
	t.Run("nil *SequencedMessage", func(t *testing.T) {
		h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 10})
		h.cc.Tell((*delivery.SequencedMessage[deliverytest.Job])(nil))
		h.send(1, true, incA)
		h.expectRequest(t, 0, 10, false)
		h.expectDelivery(t, 1)
	})
}

// panickingQueue panics in the calls its panics set names.
type panickingQueue struct {
	durable.Queue[deliverytest.Job]
	panics map[string]bool
}

func (q panickingQueue) LoadState(ctx context.Context) (durable.State[deliverytest.Job], error) {
	if q.panics["load"] {
		panic("load state exploded")
	}
	return q.Queue.LoadState(ctx)
}

func (q panickingQueue) StoreMessageSent(ctx context.Context, m durable.MessageSent[deliverytest.Job]) error {
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
			h := newPC(t, delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](panickingQueue{Queue: durable.NewMemory[deliverytest.Job](), panics: map[string]bool{call: true}}))
			h.start()
			if call == "sent" {
				r := h.expectRequestNext(t, 1, 0)
				r.SendNextTo.Tell(deliverytest.Job{N: 1})
			}
			h.watcher.ExpectStopped(t, h.pc.Path())
			err := h.logs.LoggedError(durablecalls.ErrQueuePanicked)
			if err == nil || !strings.Contains(err.Error(), "exploded") {
				t.Fatalf("logged error %v, want one that the queue panicked, with its value", err)
			}
		})
	}
}
