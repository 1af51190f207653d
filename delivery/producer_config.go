package delivery

import (
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/runtime"
)

// ProducerOption configures a producer controller beyond its settings.
type ProducerOption[A any] = impl.ProducerOption[A]

// WithDurableQueue makes the producer controller store every message in q
// before it sends it, and load q when it starts: a new controller with the
// same producer id sends again every message that was not confirmed.
func WithDurableQueue[A any](q durable.Queue[A]) ProducerOption[A] {
	return impl.WithDurableQueue[A](q)
}

// WithProducerCodec sets the codec that serializes messages when
// [ProducerSettings.ChunkLargeMessages] is on (default [JSONCodec]). The
// consumer controller must use a codec with the same manifest.
func WithProducerCodec[A any](codec Codec[A]) ProducerOption[A] {
	return impl.WithProducerCodec[A](codec)
}

// NewProducerController validates the settings and returns the factory of
// a producer controller for producerID, to give to runtime.Spawn (or to
// use as a sharded entity). Prefer [SpawnProducerController], which also
// makes the controller stop, rather than restart empty, if it fails.
//
// The controller starts sending once it has a producer ([ProducerStart]), a
// consumer controller ([RegisterConsumer], or a consumer controller's
// [RegisterToProducerController]) and, with a durable queue, the loaded
// state. Each instance has an incarnation of its own, so a consumer
// controller knows a new producer controller from the old one even when
// both have the same producer id.
func NewProducerController[A any](producerID string, settings ProducerSettings, opts ...ProducerOption[A]) (func() runtime.Behavior[ProducerCommand[A]], error) {
	return impl.NewProducerController[A](producerID, settings, opts...)
}

// SpawnProducerController spawns a producer controller under on, named
// name. It stops if it fails: a controller that restarted empty would have
// neither producer nor consumer.
func SpawnProducerController[A any](on runtime.Spawner, name, producerID string, settings ProducerSettings, opts ...ProducerOption[A]) (runtime.Ref[ProducerCommand[A]], error) {
	return impl.SpawnProducerController[A](on, name, producerID, settings, opts...)
}
