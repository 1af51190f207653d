package timers

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/trellis-go/trellis/components"
)

// KeepIdentical makes CreateRecurring keep a recurring timer of that name
// that has the same schedule (a zero Start matching any), call and
// retries: it is returned as stored, its runs on their first anchor,
// instead of being replaced by one anchored now. A service-wide timer
// created in every instance's setup needs it: without it, each instance
// that starts moves the schedule. A timer of that name that differs is
// replaced, as without the option. Two instances that create it at the
// same moment may both find none: the later one replaces the earlier,
// anchored a moment later.
func KeepIdentical() CreateOption { return func(o *createOptions) { o.keepIdentical = true } }

// identical returns the recurring timer stored under name if it is what
// CreateRecurring would make of schedule, call and maxRetries.
func (s *Scheduler) identical(ctx context.Context, name string, schedule Schedule, call components.DeferredCall, maxRetries int) (Timer, bool, error) {
	t, err := s.Get(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return Timer{}, false, nil
	}
	if err != nil {
		return Timer{}, false, fmt.Errorf("create recurring timer %q: read the one stored: %w", name, err)
	}
	if t.Recurring == nil || t.MaxRetries != maxRetries || !sameCall(t.Call, call) {
		return Timer{}, false, nil
	}
	stored := t.Recurring.Schedule
	want := schedule.filled(stored.Start)
	if !want.Start.Equal(stored.Start) || !want.End.Equal(stored.End) {
		return Timer{}, false, nil
	}
	want.Start, want.End = stored.Start, stored.End
	return t, want == stored, nil
}

// sameCall reports whether a and b make the same call.
func sameCall(a, b components.DeferredCall) bool {
	return a.ComponentID == b.ComponentID && a.Method == b.Method && a.EntityID == b.EntityID &&
		bytes.Equal(bytes.TrimSpace(a.Argument), bytes.TrimSpace(b.Argument))
}
