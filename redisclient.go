package trellis

import (
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvRedisClusterURL is the environment variable that selects a Redis
// Cluster (see Config.RedisClusterURL); ConfigFromEnv reads it.
const EnvRedisClusterURL = "TRELLIS_REDIS_CLUSTER_URL"

// validateRedisClusterURL checks Config.RedisClusterURL: at most one of the
// two Redis settings, and a URL go-redis's cluster client takes.
func validateRedisClusterURL(c Config) error {
	if c.RedisClusterURL == "" {
		return nil
	}
	if c.RedisURL != "" {
		return &ConfigError{Var: EnvRedisClusterURL, Flag: "-redis-cluster-url",
			Reason: "is set together with " + EnvRedisURL + " (-redis-url): set " + EnvRedisURL +
				" for one Redis or " + EnvRedisClusterURL + " for a Redis Cluster, not both"}
	}
	if _, err := redis.ParseClusterURL(c.RedisClusterURL); err != nil {
		return &ConfigError{Var: EnvRedisClusterURL, Flag: "-redis-cluster-url",
			Reason: "not a valid Redis Cluster URL (want redis://[user:password@]host:port?addr=host:port&addr=host:port): " +
				redact(err, c.RedisClusterURL)}
	}
	return nil
}

// clusterStateReload is how often the cluster client re-reads the slot map.
const clusterStateReload = time.Second

// newRedisClient returns the Redis client cfg asks for, nil for the
// embedded store, and a description of it for the start-up log line
// (never the password).
func newRedisClient(cfg Config) (redis.UniversalClient, []any, error) {
	switch {
	case cfg.RedisClusterURL != "":
		opts, err := redis.ParseClusterURL(cfg.RedisClusterURL)
		if err != nil { // Validate checked it; this is belt and braces
			return nil, nil, fmt.Errorf("trellis: %w", &ConfigError{Var: EnvRedisClusterURL, Reason: redact(err, cfg.RedisClusterURL)})
		}
		// go-redis re-reads the slot map on a MOVED reply, but not when
		// a master stops answering: then only every ClusterStateReloadInterval
		// (60 s by default). Once a second, the service follows a failover
		// about a second after the promotion, for one CLUSTER SLOTS a second.
		opts.ClusterStateReloadInterval = clusterStateReload
		opts.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opts), []any{"cluster", strings.Join(opts.Addrs, ",")}, nil
	case cfg.RedisURL != "":
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("trellis: %w", &ConfigError{Var: EnvRedisURL, Reason: redact(err, cfg.RedisURL)})
		}
		// A request's deadline bounds its Redis calls, whatever read timeout
		// the URL sets: a hung Redis must not hold a request past its own.
		opts.ContextTimeoutEnabled = true
		return redis.NewClient(opts), []any{"addr", opts.Addr, "db", opts.DB}, nil
	}
	return nil, nil, nil
}
