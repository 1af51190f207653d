package delivery

import (
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/runtime"
)

// ErrProducerStopped is wrapped by the error of Send once the producer
// controller behind a [Producer] has stopped (it failed, or its system
// shut down); [Producer.Err] says so from then on.
var ErrProducerStopped = impl.ErrProducerStopped

// ErrNotSent is wrapped by the error of a Send that ended before the
// message was handed to the producer controller: it will never be sent,
// and sending it again sends it once.
var ErrNotSent = impl.ErrNotSent

// Producer is a handle on a producer controller for code that is not an
// actor: an HTTP endpoint, a timed action, an entity's command. [Send]
// waits for the consumer's demand and hands the message over; it is safe
// for concurrent use, and concurrent sends go out in the order they were
// taken (one at a time, each on a RequestNext). The handle is the
// controller's producer: do not send it a [ProducerStart] of your own.
type Producer[A any] = impl.Producer[A]

// NewProducer spawns, under on, a producer controller named name for
// producerID (as [SpawnProducerController] does) and the actor behind the
// handle (named name + "-handle"), and returns the handle. Connect a
// consumer controller to [Producer.Controller] as with any producer
// controller.
func NewProducer[A any](on runtime.Spawner, name, producerID string, settings ProducerSettings, opts ...ProducerOption[A]) (*Producer[A], error) {
	return impl.NewProducer[A](on, name, producerID, settings, opts...)
}
