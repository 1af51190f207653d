package peer

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testSecret is the tests' cluster secret; TestSecretNeverLogged looks
// for it in every line logged.
var testSecret = []byte("test-cluster-secret-0123456789abcdef")

// logBuffer collects what a logger writes, for tests to read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logger logs everything, debug included, into buf.
func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startServer starts a server with cfg on loopback (the test secret and a
// logger into logs when cfg has none) and shuts it down at the test's end.
// check, if not nil, sees every request before the server does.
func startServer(t testing.TB, cfg ServerConfig, logs *logBuffer, check func(*http.Request)) *Server {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	if logs != nil {
		cfg.Logger = logs.logger()
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if check != nil {
		next := s.srv.Handler
		s.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			check(r)
			next.ServeHTTP(w, r)
		})
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// startOwned starts a server with handler h on loopback that the test
// shuts down itself.
func startOwned(t testing.TB, h Handler) *Server {
	t.Helper()
	s, err := NewServer(ServerConfig{Secret: testSecret, Logger: (&logBuffer{}).logger(), Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return s
}

// newClient makes a client with cfg (the test secret when cfg has none),
// closed at the test's end.
func newClient(t testing.TB, cfg ClientConfig) *Client {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo is a handler that answers the call's argument.
func echo(_ context.Context, c Call) (Reply, error) { return Reply{Value: c.Argument}, nil }

// countingEcho is echo that counts its calls in calls.
func countingEcho(calls *atomic.Int32) Handler {
	return func(ctx context.Context, c Call) (Reply, error) {
		calls.Add(1)
		return echo(ctx, c)
	}
}

// within bounds a test's calls.
func within(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
