package delivery

import "github.com/trellis-go/trellis/delivery/internal/impl"

// ErrInvalidSettings is wrapped by the error of a controller whose settings
// are out of range, or whose constructor is given a nil argument.
var ErrInvalidSettings = impl.ErrInvalidSettings

// ProducerSettings configure a producer controller. A zero field takes its
// default.
type ProducerSettings = impl.ProducerSettings

// DefaultProducerSettings are the defaults, written out.
func DefaultProducerSettings() ProducerSettings { return impl.DefaultProducerSettings() }

// ConsumerSettings configure a consumer controller. A zero field takes its
// default.
type ConsumerSettings = impl.ConsumerSettings

// DefaultConsumerSettings are the defaults, written out.
func DefaultConsumerSettings() ConsumerSettings { return impl.DefaultConsumerSettings() }

// Defaults of the settings; a zero field of a settings struct means its default.
const (
	DefaultFlowControlWindow          = impl.DefaultFlowControlWindow
	DefaultResendIntervalMin          = impl.DefaultResendIntervalMin
	DefaultResendIntervalMax          = impl.DefaultResendIntervalMax
	DefaultRedeliverAfter             = impl.DefaultRedeliverAfter
	DefaultDurableQueueRequestTimeout = impl.DefaultDurableQueueRequestTimeout
	DefaultDurableQueueRetryAttempts  = impl.DefaultDurableQueueRetryAttempts
	DefaultDurableQueueRetryBackoff   = impl.DefaultDurableQueueRetryBackoff
	DefaultDurableQueueStoreAhead     = impl.DefaultDurableQueueStoreAhead
	DefaultResendFirstInterval        = impl.DefaultResendFirstInterval
)
