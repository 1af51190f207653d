package assembly

import (
	"context"
	"errors"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/idempotency"
	"github.com/trellis-go/trellis/internal/store"
)

// openStore makes the host's store, and its Redis client when there is
// one. A Redis that refuses the URL's settings is a *SettingError naming
// the setting: the service does not start. A Redis that does not answer
// yet is only logged: the service starts unready, and /readyz says why
// until Redis answers.
func openStore(a *assembly) error {
	h, cfg := a.host, a.cfg
	conn, err := store.Open(cfg.RedisURL, cfg.RedisClusterURL, h.Logger)
	if err != nil { // the settings' check took the URL; this is belt and braces
		return &SettingError{Setting: Setting{Var: cfg.StoreSetting.Var}, Reason: err.Error()}
	}
	if conn == nil {
		h.Store = entities.NewMemoryStore()
		h.Idempotency = idempotency.NewMemoryStore(h.Clock)
		h.Logger.Warn("TRELLIS_REDIS_URL is not set: using the embedded in-memory store, which is NOT durable; " +
			"all state is lost when the process stops. Set TRELLIS_REDIS_URL (or TRELLIS_REDIS_CLUSTER_URL) to keep it in Redis.")
		return nil
	}
	var refused *store.RefusedError
	switch err := store.Check(context.Background(), conn.Client); {
	case errors.As(err, &refused):
		_ = conn.Close()
		return &SettingError{Setting: cfg.StoreSetting, Reason: refused.Error()}
	case err != nil:
		h.Logger.Warn("the state store's Redis does not answer yet: starting unready; /readyz says why until it does",
			"err", store.Redact(err, cfg.RedisURL, cfg.RedisClusterURL))
	}
	// Closed last, once nothing can use it; a kill closes it at once, so
	// that nothing is told to Redis any more.
	a.add(part{name: "Redis", stop: func(context.Context) error { return conn.Close() }, cut: func() { _ = conn.Close() }})
	h.Redis = conn.Client
	h.Idempotency = idempotency.NewRedisStore(h.Redis, cfg.RedisPrefix)
	if cfg.Cluster != nil {
		// One owner per entity: writes are fenced by the shard's epoch,
		// and the state shares its shard record's slot.
		h.Store = entities.NewShardedRedisStore(h.Redis, cfg.RedisPrefix)
	} else {
		h.Store = entities.NewRedisStore(h.Redis, cfg.RedisPrefix)
	}
	h.Logger.Info("state store: Redis", append(conn.Desc, "prefix", cfg.RedisPrefix)...)
	return nil
}

// changeLog is the store's change log, which consumers and views read:
// the embedded store's, or the sharded store's in the cluster mode. The
// per-instance Redis store keeps none: then it is nil, and the reason
// says why what (consumers, views) cannot start.
func changeLog(a *assembly, what string) (log entities.ChangeLog, reason string) {
	if log, ok := a.host.Store.(entities.ChangeLog); ok {
		return log, ""
	}
	return nil, what + " need the cluster mode on Redis (set " + a.cfg.ClusterSetting + "), or the embedded store: " +
		"a Redis store without it keeps no change log"
}
