package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }

// testLease is the lease of the tests that run on Redis's real expiry:
// short, so that a takeover takes about a second.
const testLease = time.Second

// testPrefix returns a prefix of the test's own, whose keys are deleted
// when it ends.
func testPrefix(t *testing.T, client redis.UniversalClient) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := "clustertest-" + hex.EncodeToString(b)
	t.Cleanup(func() { testenv.DeleteKeys(t, client, keyspace.Must(p).Pattern()) })
	return p
}

// testLogger logs warnings and errors when TRELLIS_TEST_CLUSTER_LOG is set,
// nothing otherwise.
func testLogger() *slog.Logger {
	if os.Getenv("TRELLIS_TEST_CLUSTER_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testConfig is a valid Config for member id on prefix.
func testConfig(client redis.UniversalClient, prefix, id string) Config {
	return Config{Client: client, Prefix: prefix, ID: id, Addr: "127.0.0.1:7000",
		Lease: testLease, Margin: 100 * time.Millisecond, Logger: testLogger()}
}

// mustJoin joins, failing the test on error; the member leaves (or just
// stops renewing, if it already left) when the test ends.
func mustJoin(t *testing.T, cfg Config) *Member {
	t.Helper()
	m, err := Join(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Join(%s): %v", cfg.ID, err)
	}
	t.Cleanup(func() { _ = m.Leave(context.Background()) })
	return m
}
