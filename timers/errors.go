package timers

import (
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
)

// Errors of the scheduler. Each is wrapped with the operation and the
// timer's name; test with errors.Is.
var (
	// ErrNotFound: no timer has the name (Get).
	ErrNotFound = errors.New("timer not found")
	// ErrInvalid: the timer cannot be created as asked (empty name,
	// negative delay, negative maxRetries, a call that fails Validate).
	ErrInvalid = errors.New("invalid timer")
	// ErrLimitExceeded is wrapped by every *LimitError.
	ErrLimitExceeded = errors.New("timer limit exceeded")
	// ErrInvalidQuery: a List query with a bad limit or cursor.
	ErrInvalidQuery = errors.New("invalid timer query")
	// ErrStoreWiped is wrapped by *WipedError.
	ErrStoreWiped = errors.New("timer store was wiped")
	// ErrNameTaken: a dead letter cannot be retried while an active timer
	// has its name (RetryDeadLetter); delete or wait for that timer first.
	ErrNameTaken = errors.New("an active timer has the name")
	// ErrNotStarted: Ready was asked of a scheduler that is not running.
	ErrNotStarted = errors.New("timer scheduler is not running")
)

// Limit names a limit of the scheduler.
type Limit string

// The limits, as [LimitError.Limit] names them.
const (
	// LimitPayload is the size of a call's serialized argument, in bytes.
	LimitPayload Limit = "payload size"
	// LimitActive is the number of timers in the store (per service).
	LimitActive Limit = "active timers"
	// LimitName is the length of a timer name, in bytes.
	LimitName Limit = "name length"
)

// LimitError is a Create refused because it would break a limit. It names
// the limit, the value that broke it and the maximum, and wraps
// ErrLimitExceeded and components.ErrLimit; the active-timers limit also
// wraps components.ErrUnavailable, since room comes back as timers fire:
//
//	var le *timers.LimitError
//	if errors.As(err, &le) && le.Limit == timers.LimitActive { … }
type LimitError struct {
	Limit Limit
	// Value is what was asked: the argument's size, the number of active
	// timers the create found, or the name's length.
	Value int
	// Max is the configured maximum.
	Max int
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case LimitPayload:
		return fmt.Sprintf("%s limit exceeded: the serialized argument is %d bytes, the limit is %d", e.Limit, e.Value, e.Max)
	case LimitActive:
		return fmt.Sprintf("%s limit exceeded: %d timers are active, the limit is %d (replacing an existing name does not count)", e.Limit, e.Value, e.Max)
	case LimitName:
		return fmt.Sprintf("%s limit exceeded: the name is %d bytes, the limit is %d", e.Limit, e.Value, e.Max)
	}
	return fmt.Sprintf("%s limit exceeded: %d, the limit is %d", e.Limit, e.Value, e.Max)
}

// Unwrap returns ErrLimitExceeded and components.ErrLimit, and
// components.ErrUnavailable for the active-timers limit.
func (e *LimitError) Unwrap() []error {
	if e.Limit == LimitActive {
		return []error{ErrLimitExceeded, components.ErrLimit, components.ErrUnavailable}
	}
	return []error{ErrLimitExceeded, components.ErrLimit}
}

// WipedError says the store lost its state: a marker key the scheduler
// wrote when it started is gone, so Redis (or, on a cluster, the master of
// that partition) was flushed or restarted without persistence, and the
// timers stored there before then are lost. It wraps ErrStoreWiped and
// stays until [Scheduler.AcknowledgeWipe] or a restart.
type WipedError struct {
	// Marker names the keys that disappeared (", " between them): one per
	// partition that lost its state.
	Marker string
	// DetectedAt is when this instance noticed, on its scheduler's clock.
	DetectedAt time.Time
}

func (e *WipedError) Error() string {
	return fmt.Sprintf("%v: marker keys %q disappeared (noticed at %s); timers stored before then are lost. "+
		"Run Redis with persistence (appendonly yes), then acknowledge (POST /admin/timers/wipe/acknowledge) or restart the instance",
		ErrStoreWiped, e.Marker, e.DetectedAt.Format(time.RFC3339))
}

// Unwrap returns ErrStoreWiped.
func (e *WipedError) Unwrap() error { return ErrStoreWiped }
