package testenv

import (
	"context"
	"crypto/rand"
	"testing"
	"time"
)

// TestRedis proves the test command's Redis plumbing: the URL is set, the
// server answers PING, and a SET/GET round trip works.
func TestRedis(t *testing.T) {
	client := Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	pong, err := client.Ping(ctx).Result()
	if err != nil {
		t.Fatalf("PING: %v", err)
	}
	if pong != "PONG" {
		t.Fatalf("PING = %q, want %q", pong, "PONG")
	}

	key := "trellis:testenv:" + rand.Text()
	const value = "hello"
	t.Cleanup(func() {
		if err := client.Del(context.Background(), key).Err(); err != nil {
			t.Errorf("DEL %s: %v", key, err)
		}
	})
	if err := client.Set(ctx, key, value, time.Minute).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
	got, err := client.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	if got != value {
		t.Fatalf("GET %s = %q, want %q", key, got, value)
	}
}
