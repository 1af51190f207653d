// Package testenv holds helpers for tests that need real services, such as
// Redis, and the helpers that tests of several packages share: bounded waits
// (Recv, Eventually) and an actor probe (Probe). The helpers never skip: a
// test that needs a service and cannot reach it fails, saying how to provide
// the service.
package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisURLEnv is the environment variable that points tests at a real Redis.
const RedisURLEnv = "TRELLIS_TEST_REDIS_URL"

// RedisURL returns the Redis URL from TRELLIS_TEST_REDIS_URL. If the variable
// is empty it fails the test with a message that says how to run it.
func RedisURL(t testing.TB) string {
	t.Helper()
	return requireEnv(t, RedisURLEnv, "a real Redis", "a throwaway Redis", "redis://127.0.0.1:PORT/0")
}

// requireEnv returns the variable name, or fails the test saying that it
// needs what, that the test command starts a throwaway one, and what to
// set the variable to instead.
func requireEnv(t testing.TB, name, what, throwaway, example string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatal("this test needs " + what + ": run it with `make test` (or `bash scripts/test.sh`), " +
			"which starts " + throwaway + ", or set " + name + "=" + example)
	}
	return v
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
