package api

import (
	"errors"
	"io"
	"net"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/timers"
)

// RetryAfterSeconds is the Retry-After every 503 carries: long enough for
// a restarted Redis to come back or a burst of timers to fire, short
// enough that a client does not give up on a passing outage.
const RetryAfterSeconds = 5

// retryAfter is RetryAfterSeconds as the header's value.
var retryAfter = strconv.Itoa(RetryAfterSeconds)

// storeUnavailable reports whether err says the state store could not
// serve the request, whatever its data: it was unreachable (a network
// error, a connection closed mid-reply, no connection free in the pool,
// the client closed at shutdown) or answered that it cannot work now
// (loading its data, read-only, out of memory, too many clients, a cluster
// or primary down, a login refused). The entity store, the timer store and
// the component client all wrap these errors with %w, so this one test
// covers every route: each answers 503, to be retried, instead of a 500.
func storeUnavailable(err error) bool {
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted):
		return true
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsOOMError(err) ||
		redis.IsMaxClientsError(err) || redis.IsClusterDownError(err) || redis.IsMasterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsAuthError(err) || redis.HasErrorPrefix(err, "BUSY") ||
		redis.HasErrorPrefix(err, "DB index is out of range")
}

// timerLimit is the limit of the timer scheduler that err broke, if any.
func timerLimit(err error) (*timers.LimitError, bool) {
	var le *timers.LimitError
	return le, errors.As(err, &le)
}
