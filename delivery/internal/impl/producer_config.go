package impl

import (
	"fmt"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/runtime"
)

// ProducerOption configures a producer controller beyond its settings.
type ProducerOption[A any] func(*producerConfig[A])

// WithDurableQueue makes the producer controller store every message in q
// before it sends it, and load q when it starts: a new controller with the
// same producer id sends again every message that was not confirmed.
func WithDurableQueue[A any](q durable.Queue[A]) ProducerOption[A] {
	return func(c *producerConfig[A]) { c.queue, c.queueSet = q, true }
}

// WithProducerCodec sets the codec that serializes messages when
// [ProducerSettings.ChunkLargeMessages] is on (default [JSONCodec]). The
// consumer controller must use a codec with the same manifest.
func WithProducerCodec[A any](codec Codec[A]) ProducerOption[A] {
	return func(c *producerConfig[A]) { c.codec = codec }
}

type producerConfig[A any] struct {
	id       string
	settings ProducerSettings
	queue    durable.Queue[A]
	queueSet bool // WithDurableQueue was given, so queue must not be nil
	// generation is that of the producer controllers of a work-pulling or
	// sharding controller: the incarnation of its durable queue.
	generation uint64
	codec      Codec[A]
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
	cfg, err := newProducerConfig(producerID, settings, opts)
	if err != nil {
		return nil, err
	}
	return func() runtime.Behavior[ProducerCommand[A]] { return newProducer(cfg) }, nil
}

// SpawnProducerController spawns a producer controller under on, named
// name. It stops if it fails: a controller that restarted empty would have
// neither producer nor consumer.
func SpawnProducerController[A any](on runtime.Spawner, name, producerID string, settings ProducerSettings, opts ...ProducerOption[A]) (runtime.Ref[ProducerCommand[A]], error) {
	factory, err := NewProducerController(producerID, settings, opts...)
	if err != nil {
		return nil, err
	}
	return controller.Spawn(on, name, fmt.Sprintf("producer controller %q", producerID), factory)
}

func newProducerConfig[A any](producerID string, settings ProducerSettings, opts []ProducerOption[A]) (*producerConfig[A], error) {
	s, err := settings.validate()
	if err != nil {
		return nil, fmt.Errorf("producer controller %q: %w", producerID, err)
	}
	if producerID == "" {
		return nil, fmt.Errorf("producer controller: %w: the producer id is empty", ErrInvalidSettings)
	}
	cfg := &producerConfig[A]{id: producerID, settings: s, codec: JSONCodec[A]{}}
	for _, o := range opts {
		o(cfg)
	}
	if cfg.queueSet && isNil(cfg.queue) {
		return nil, fmt.Errorf("producer controller %q: %w: the durable queue is nil (%T)", producerID, ErrInvalidSettings, cfg.queue)
	}
	if isNil(cfg.codec) {
		return nil, fmt.Errorf("producer controller %q: %w: the codec is nil", producerID, ErrInvalidSettings)
	}
	return cfg, nil
}
