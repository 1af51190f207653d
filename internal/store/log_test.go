package store

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"go.uber.org/goleak"
)

// TestLogPerClient: the Redis client's own messages go to the logger of
// the service whose client it is, not to that of the one opened last.
func TestLogPerClient(t *testing.T) {
	var bufA, bufB testenv.LogBuffer
	// Port 1 on loopback: nothing listens there, every dial is refused.
	a, err := Open("redis://127.0.0.1:1/0", "", slog.New(slog.NewJSONHandler(&bufA, nil)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open("redis://127.0.0.1:1/1", "", slog.New(slog.NewJSONHandler(&bufB, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if a.Client.Ping(ctx).Err() == nil {
		t.Fatal("PING of nothing answered")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bufA.String(), `"component":"redis"`) || !strings.Contains(bufA.String(), "redis client: ") {
		t.Fatalf("client A's logger got %q, want the dial failures", bufA.String())
	}
	if bufB.String() != "" {
		t.Fatalf("client B's logger got %q, which is about client A", bufB.String())
	}
	if l := fallback(); l == nil || l.Handler() != b.log.Handler() {
		t.Fatal("the fallback logger is not that of the client still open")
	}
}

// TestMain fails the package if a test leaves a goroutine behind: a
// closed client must leave nothing running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }
