package store

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// checkTimeout bounds the start-up check: an unreachable Redis delays the
// start by at most this.
const checkTimeout = 5 * time.Second

// RefusedError is Redis refusing a connection's settings, which retrying
// cannot cure: a database index beyond the server's databases, a login
// refused, a user without the permission.
type RefusedError struct {
	Reply redis.Error // what Redis answered
}

func (e *RefusedError) Error() string {
	return "Redis refuses the URL's settings: " + e.Reply.Error()
}

// Check pings Redis once, through the connection set-up the URL asks for
// (the login, the SELECT of its database), within checkTimeout. It
// returns nil when Redis answers, a *RefusedError when Redis refuses the
// settings, and the error otherwise: a Redis that does not answer yet,
// which may come.
func Check(ctx context.Context, client redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	err := client.Ping(ctx).Err()
	var reply redis.Error
	if err != nil && errors.As(err, &reply) && (redis.IsAuthError(err) || redis.IsPermissionError(err) ||
		redis.HasErrorPrefix(err, "DB index is out of range")) {
		return &RefusedError{Reply: reply}
	}
	return err
}
