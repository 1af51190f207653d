package api

import (
	"errors"
	"strconv"

	"github.com/trellis-go/trellis/components"
)

// RetryAfterSeconds is the Retry-After every 503 carries: long enough for
// a restarted Redis to come back or a burst of timers to fire, short
// enough that a client does not give up on a passing outage.
const RetryAfterSeconds = 5

// retryAfter is RetryAfterSeconds as the header's value.
var retryAfter = strconv.Itoa(RetryAfterSeconds)

// limitRefusal is the error of err's chain that wraps components.ErrLimit
// itself (such as a *timers.LimitError), whose message names the limit
// in words a client may read; nil when err wraps no ErrLimit.
func limitRefusal(err error) error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if u.Unwrap() == components.ErrLimit {
			return err
		}
		if next := u.Unwrap(); next != nil {
			return limitRefusal(next)
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if e == components.ErrLimit {
				return err
			}
		}
		for _, e := range u.Unwrap() {
			if found := limitRefusal(e); found != nil {
				return found
			}
		}
	}
	if errors.Is(err, components.ErrLimit) { // an Is method of its own
		return err
	}
	return nil
}
