package keyspace

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Ping checks that every server that may hold a space's keys answers: one
// Redis, or every master of a cluster (the keys spread over all of them,
// so a store is only reachable when all are).
func Ping(ctx context.Context, client redis.UniversalClient) error {
	cc, ok := client.(*redis.ClusterClient)
	if !ok {
		return client.Ping(ctx).Err()
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if err := m.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("master %s: %w", m.Options().Addr, err)
		}
		return nil
	})
}
