package timers

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestStartRetrying: a scheduler whose Redis does not answer yet starts
// unready and keeps trying in the background; once Redis answers, it
// runs; Shutdown stops both the retries and the scheduler.
func TestStartRetrying(t *testing.T) {
	port := testenv.FreePort(t)
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = client.Close() })
	// A server of the test's own: nothing to delete afterwards.
	s := newScheduler(t, NewRedisStore(client, newTestPrefix()), newRecorder(nil), Config{})
	s.StartRetrying(10 * time.Millisecond)
	if err := s.Ready(t.Context()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Ready before Redis answers: %v, want ErrNotStarted", err)
	}
	testenv.StartRedisServerOn(t, port)
	waitFor(t, "the scheduler to start once Redis answers", func() bool { return s.Ready(t.Context()) == nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := s.Ready(t.Context()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Ready after Shutdown: %v, want ErrNotStarted", err)
	}
}

// TestStartRetryingStopsAtShutdown: Shutdown ends the retries of a
// scheduler whose store never answers, leaving no goroutine behind
// (TestMain checks).
func TestStartRetryingStopsAtShutdown(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = client.Close() })
	s := newScheduler(t, NewRedisStore(client, newTestPrefix()), newRecorder(nil), Config{})
	s.StartRetrying(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
