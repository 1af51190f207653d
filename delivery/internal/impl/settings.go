package impl

import (
	"fmt"
	"time"

	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
)

// ErrInvalidSettings is wrapped by the error of a controller whose settings
// are out of range, or whose constructor is given a nil argument.
var ErrInvalidSettings = controller.ErrInvalidSettings

// Defaults of the settings; a zero field of a settings struct means its default.
const (
	DefaultFlowControlWindow          = 50
	DefaultResendIntervalMin          = 2 * time.Second
	DefaultResendIntervalMax          = 30 * time.Second
	DefaultRedeliverAfter             = 30 * time.Second
	DefaultDurableQueueRequestTimeout = 3 * time.Second
	DefaultDurableQueueRetryAttempts  = 10
	DefaultDurableQueueRetryBackoff   = 100 * time.Millisecond
	DefaultDurableQueueStoreAhead     = 1024
	DefaultResendFirstInterval        = time.Second
)

// ProducerSettings configure a producer controller. A zero field takes its
// default.
type ProducerSettings struct {
	// ChunkLargeMessages, when above 0, makes the controller serialize every
	// message with its codec and split one longer than this many bytes into
	// chunks, each with its own sequence number. 0 (the default) sends
	// messages as they are.
	ChunkLargeMessages int
	// DurableQueueRequestTimeout bounds each call to the durable queue
	// (default 3 s).
	DurableQueueRequestTimeout time.Duration
	// DurableQueueRetryAttempts is how many times a failed or timed-out
	// load or store is tried again before the controller fails (default 10).
	DurableQueueRetryAttempts int
	// DurableQueueRetryBackoff is the pause before trying again a call that
	// failed fast, so a store that is briefly down is not retried in a burst
	// (default 100 ms). A call that timed out is retried at once.
	DurableQueueRetryBackoff time.Duration
	// DurableQueueStoreAhead is how many messages beyond the consumer
	// controller's demand a point-to-point producer controller with a
	// durable queue takes from its producer and stores (default 1024):
	// storing then overlaps the consumer's work instead of waiting for its
	// demand, and the stored messages go out as soon as demand comes. Once
	// stored they survive a crash like any other: a restart sends them. A
	// negative value takes a message only within demand, a store round
	// trip behind it. (The work-pulling and sharding controllers take
	// messages as their workers and entities ask.)
	DurableQueueStoreAhead int
	// ResendFirstInterval is how often the first message of an association
	// is sent again until the consumer controller confirms it (default 1 s).
	ResendFirstInterval time.Duration
}

// DefaultProducerSettings are the defaults, written out.
func DefaultProducerSettings() ProducerSettings { return ProducerSettings{}.withDefaults() }

func (s ProducerSettings) withDefaults() ProducerSettings {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&s.DurableQueueRequestTimeout, DefaultDurableQueueRequestTimeout)
	def(&s.DurableQueueRetryBackoff, DefaultDurableQueueRetryBackoff)
	def(&s.ResendFirstInterval, DefaultResendFirstInterval)
	if s.DurableQueueRetryAttempts == 0 {
		s.DurableQueueRetryAttempts = DefaultDurableQueueRetryAttempts
	}
	if s.DurableQueueStoreAhead == 0 {
		s.DurableQueueStoreAhead = DefaultDurableQueueStoreAhead
	}
	return s
}

// durable returns the settings of the calls to a durable queue.
func (s ProducerSettings) durable() durablecalls.Settings {
	return durablecalls.Settings{
		DurableQueueRequestTimeout: s.DurableQueueRequestTimeout,
		DurableQueueRetryAttempts:  s.DurableQueueRetryAttempts,
		DurableQueueRetryBackoff:   s.DurableQueueRetryBackoff,
	}
}

// validate returns the settings with defaults applied, or an error naming
// the first field out of range.
func (s ProducerSettings) validate() (ProducerSettings, error) {
	s = s.withDefaults()
	switch {
	case s.ChunkLargeMessages < 0:
		return s, invalid("ProducerSettings.ChunkLargeMessages", s.ChunkLargeMessages, "must be at least 1 byte (or 0 for no chunking)")
	case s.DurableQueueRequestTimeout < 0:
		return s, invalid("ProducerSettings.DurableQueueRequestTimeout", s.DurableQueueRequestTimeout, "must be positive")
	case s.DurableQueueRetryAttempts < 0:
		return s, invalid("ProducerSettings.DurableQueueRetryAttempts", s.DurableQueueRetryAttempts, "must not be negative")
	case s.DurableQueueRetryBackoff < 0:
		return s, invalid("ProducerSettings.DurableQueueRetryBackoff", s.DurableQueueRetryBackoff, "must not be negative")
	case s.ResendFirstInterval < time.Millisecond:
		return s, invalid("ProducerSettings.ResendFirstInterval", s.ResendFirstInterval, "must be at least 1ms")
	}
	return s, nil
}

// ConsumerSettings configure a consumer controller. A zero field takes its
// default.
type ConsumerSettings struct {
	// FlowControlWindow is W: at most W messages are in flight from the
	// producer controller, which hears of confirmations every W/2
	// (default 50, at least 2).
	FlowControlWindow int
	// ResendIntervalMin is the first wait, after the last message, before
	// the controller asks the producer controller again; each further idle
	// wait is 1.5 times longer, up to ResendIntervalMax (defaults 2 s, 30 s).
	// While a Delivery is out, the controller waits for its consumer, not
	// for the producer controller: it does not ask.
	ResendIntervalMin time.Duration
	ResendIntervalMax time.Duration
	// RedeliverAfter is how long a Delivery may stay unconfirmed before the
	// controller takes it for lost and delivers it again, with the same
	// SeqNr, so that a consumer that dropped it cannot hang the stream
	// (default 30 s, checked on the retry ticks; negative: never).
	RedeliverAfter time.Duration
	// OnlyFlowControl turns off resending: lost messages stay lost, gaps
	// are delivered, and the producer controller keeps nothing for
	// resending. A chunked message that lost a chunk is dropped whole, and
	// an idle consumer controller asks for a window past all that came,
	// so a lost message or chunk holds the stream for about one retry
	// interval (ResendIntervalMin, longer when the retry is lost too; see
	// the package doc).
	OnlyFlowControl bool
}

// DefaultConsumerSettings are the defaults, written out.
func DefaultConsumerSettings() ConsumerSettings { return ConsumerSettings{}.withDefaults() }

func (s ConsumerSettings) withDefaults() ConsumerSettings {
	if s.FlowControlWindow == 0 {
		s.FlowControlWindow = DefaultFlowControlWindow
	}
	if s.ResendIntervalMin == 0 {
		s.ResendIntervalMin = DefaultResendIntervalMin
	}
	if s.ResendIntervalMax == 0 {
		s.ResendIntervalMax = max(DefaultResendIntervalMax, s.ResendIntervalMin)
	}
	if s.RedeliverAfter == 0 {
		s.RedeliverAfter = DefaultRedeliverAfter
	}
	return s
}

func (s ConsumerSettings) validate() (ConsumerSettings, error) {
	s = s.withDefaults()
	switch {
	case s.FlowControlWindow < 2:
		return s, invalid("ConsumerSettings.FlowControlWindow", s.FlowControlWindow, "must be at least 2")
	case s.ResendIntervalMin < time.Millisecond:
		return s, invalid("ConsumerSettings.ResendIntervalMin", s.ResendIntervalMin, "must be at least 1ms")
	case s.ResendIntervalMax < s.ResendIntervalMin:
		return s, invalid("ConsumerSettings.ResendIntervalMax", s.ResendIntervalMax,
			fmt.Sprintf("must be at least ResendIntervalMin (%v)", s.ResendIntervalMin))
	}
	return s, nil
}

var invalid = controller.Invalid
