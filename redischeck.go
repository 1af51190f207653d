package trellis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCheckTimeout bounds the start-up check of Redis: an unreachable
// Redis delays the start by at most this.
const redisCheckTimeout = 5 * time.Second

// checkRedis pings the store's Redis once at start-up, through the
// connection set-up the URL asks for (the login, the SELECT of its
// database). A refusal that retrying cannot cure, because the setting
// is wrong (a database index beyond the server's databases, a login
// refused, a user without the permission), is a *ConfigError naming the
// variable and quoting Redis: the service does not start. A Redis that
// does not answer yet is only logged: the service starts unready, and
// /readyz says why until Redis answers.
func checkRedis(ctx context.Context, h *Host) error {
	ctx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
	defer cancel()
	err := h.Redis.Ping(ctx).Err()
	var reply redis.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &reply) && (redis.IsAuthError(err) || redis.IsPermissionError(err) ||
		redis.HasErrorPrefix(err, "DB index is out of range")):
		if h.Config.RedisClusterURL != "" {
			return &ConfigError{Var: EnvRedisClusterURL, Flag: "-redis-cluster-url", Reason: fmt.Sprintf("Redis refuses the URL's settings: %v", reply)}
		}
		return &ConfigError{Var: EnvRedisURL, Flag: "-redis-url", Reason: fmt.Sprintf("Redis refuses the URL's settings: %v", reply)}
	}
	h.Logger.Warn("the state store's Redis does not answer yet: starting unready; /readyz says why until it does",
		"err", redact(err, h.Config.RedisURL, h.Config.RedisClusterURL))
	return nil
}
