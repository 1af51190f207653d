package store

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
)

// Unavailable reports whether err says Redis could not serve the call,
// whatever its data: it was unreachable (a network error, a connection
// closed mid-reply, no connection free in the pool, the client closed at
// shutdown) or answered that it cannot work now (loading its data,
// read-only, out of memory, too many clients, a cluster or primary down,
// busy, a login refused). The caller's own deadline or cancellation is
// not: it says nothing of Redis.
func Unavailable(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false
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

// Classify returns err marked as components.ErrUnavailable when Redis
// could not serve the call (see Unavailable), and err itself otherwise
// (nil for nil). The mark leaves the message and every error err wraps
// as they were.
func Classify(err error) error {
	if err == nil || errors.Is(err, components.ErrUnavailable) || !Unavailable(err) {
		return err
	}
	return unavailableError{err}
}

// unavailableError is an error of Redis that wraps components.ErrUnavailable
// besides its own chain.
type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, components.ErrUnavailable} }

// Reply is the error Redis answered, when err holds one (a database index
// out of range, a login refused, still loading): words an operator needs
// to fix the setting. false for an error of the connection.
func Reply(err error) (string, bool) {
	var reply redis.Error
	if errors.As(err, &reply) {
		return reply.Error(), true
	}
	return "", false
}
