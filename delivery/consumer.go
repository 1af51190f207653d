package delivery

import (
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/runtime"
)

// ConsumerOption configures a consumer controller beyond its settings.
type ConsumerOption[A any] = impl.ConsumerOption[A]

// WithConsumerCodec sets the codec that joins chunked messages (default
// [JSONCodec]); its manifest must be the producer controller's.
func WithConsumerCodec[A any](codec Codec[A]) ConsumerOption[A] {
	return impl.WithConsumerCodec[A](codec)
}

// NewConsumerController validates the settings and returns the factory of
// a consumer controller, to give to runtime.Spawn. Prefer
// [SpawnConsumerController], which also makes it stop, rather than restart
// empty, if it fails.
//
// The controller delivers to the consumer of [ConsumerStart], one message
// at a time, what the producer controller it is connected to sends
// ([RegisterToProducerController], or the producer controller's
// [RegisterConsumer]). It drives the flow: it asks for at most
// FlowControlWindow messages ahead, detects lost ones by their sequence
// numbers and asks for them again, and drops duplicates.
func NewConsumerController[A any](settings ConsumerSettings, opts ...ConsumerOption[A]) (func() runtime.Behavior[ConsumerCommand[A]], error) {
	return impl.NewConsumerController[A](settings, opts...)
}

// SpawnConsumerController spawns a consumer controller under on, named
// name, that stops if it fails.
func SpawnConsumerController[A any](on runtime.Spawner, name string, settings ConsumerSettings, opts ...ConsumerOption[A]) (runtime.Ref[ConsumerCommand[A]], error) {
	return impl.SpawnConsumerController[A](on, name, settings, opts...)
}
