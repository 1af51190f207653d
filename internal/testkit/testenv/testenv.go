// Package testenv holds helpers for tests that need real services, such as
// Redis, and the helpers that tests of several packages share: bounded waits
// (Recv, Eventually) and an actor probe (Probe). A test that needs Redis or
// a Redis Cluster gets the one its variable names, or else a throwaway one
// the test binary starts (shared.go). The helpers never skip: a test that
// needs a service and cannot have it fails, saying how to provide it.
package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisURLEnv is the environment variable that points tests at a real Redis.
const RedisURLEnv = "TRELLIS_TEST_REDIS_URL"

// RedisURL returns the Redis URL from TRELLIS_TEST_REDIS_URL or, when it is
// empty, that of the test binary's shared throwaway redis-server (see
// shared.go). If that cannot start, it fails the test saying why.
func RedisURL(t testing.TB) string {
	t.Helper()
	return serverURL(t, RedisURLEnv, "a real Redis", sharedRedisURL)
}

// Redis returns a client for the Redis at RedisURL, after checking with a
// PING that it answers within 5 s. The client is closed when the test ends.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	url := RedisURL(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("%s=%q: %v", RedisURLEnv, url, err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("cannot reach Redis at %s (%s): %v", url, RedisURLEnv, err)
	}
	return client
}
