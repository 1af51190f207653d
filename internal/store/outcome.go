package store

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
)

// ClassifyWrite is Classify for a command that changes data, which must
// tell "not done" from "not known":
//
//   - a failure before the command could have reached Redis (a dial that
//     failed, no connection free in the pool, the client closed, a write
//     to the socket that failed: Redis runs no partial command) and a
//     reply in which Redis refused to work (LOADING, READONLY, OOM,
//     CLUSTERDOWN, …) are components.ErrUnavailable, as Classify says:
//     nothing was changed;
//   - a failure after the command was written (the reply timed out, the
//     connection closed or was reset while waiting for it, the caller's
//     deadline or cancellation, which may have struck while the reply
//     was awaited) is components.ErrOutcomeUnknown: Redis may have
//     applied it.
//
// The error cannot always say which side of the write it came from (a
// context error may come from the pool's queue or from the reply's
// wait); then it is ErrOutcomeUnknown, the answer that is never false.
// This holds only because Open turns go-redis's retries off: with them,
// the last attempt's "dial refused" would hide an earlier attempt whose
// reply was lost. The mark keeps the message and the chain.
func ClassifyWrite(err error) error {
	switch {
	case err == nil, errors.Is(err, components.ErrUnavailable), errors.Is(err, components.ErrOutcomeUnknown):
		return err
	case maybeSent(err):
		return outcomeUnknownError{err}
	}
	return Classify(err)
}

// maybeSent reports whether err leaves it possible that Redis received the
// whole command: an error of the connection (or a context error) other
// than those that happen before anything is written.
func maybeSent(err error) bool {
	var reply redis.Error
	if errors.As(err, &reply) {
		return false // Redis answered: the command ran or was refused
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed) {
		return false // no connection was had
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && (opErr.Op == "dial" || opErr.Op == "write") {
		return false // not connected, or the command was not written whole
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	return Unavailable(err) // any other error of the connection: a read's
}

// outcomeUnknownError is an error of Redis that wraps
// components.ErrOutcomeUnknown besides its own chain.
type outcomeUnknownError struct{ err error }

func (e outcomeUnknownError) Error() string   { return e.err.Error() }
func (e outcomeUnknownError) Unwrap() []error { return []error{e.err, components.ErrOutcomeUnknown} }

// ClassifyWriteBy is ClassifyWrite for a write that client sent. A Redis
// Cluster client resends a command whose reply timed out, to the same node
// and then to another, up to MaxRedirects times (retries that cannot be
// turned off without losing its handling of MOVED during a failover), so
// its last error ("connection refused", CLUSTERDOWN) says nothing of the
// sends before it: on a cluster, a write that failed may always have been
// applied, and is components.ErrOutcomeUnknown. A one-Redis client sends
// once (see Open), and ClassifyWrite tells the two apart.
func ClassifyWriteBy(client redis.UniversalClient, err error) error {
	classified := ClassifyWrite(err)
	_, cluster := client.(*redis.ClusterClient)
	if cluster && errors.Is(classified, components.ErrUnavailable) && !errors.Is(err, components.ErrUnavailable) {
		return outcomeUnknownError{err} // and not ErrUnavailable, whose promise it breaks
	}
	return classified
}
