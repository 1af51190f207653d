package node

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }

// testConfig is a node's configuration on client under a prefix of the
// test's own, on a free loopback port.
func testConfig(t *testing.T, client redis.UniversalClient) Config {
	t.Helper()
	prefix := "node-" + rand.Text()[:8]
	t.Cleanup(func() { testenv.DeleteKeys(t, testenv.Redis(t), keyspace.Must(prefix).Pattern()) })
	sys := runtime.NewSystem("node-test")
	t.Cleanup(func() { _ = sys.Shutdown(context.Background()) })
	return Config{Redis: client, Prefix: prefix, Lease: 2 * time.Second, Listen: "127.0.0.1:0", ListenSetting: "TEST_ADDR",
		Shards: NewShards(), Registry: components.NewRegistry(), System: sys, Logger: slog.New(slog.DiscardHandler)}
}

// TestJoinServesAndLeaves: a node alone joins, is ready, takes every
// shard once started, runs a forwarded call of a kind registered on it
// (sent to itself over the transport) and every other call as an entity
// command; a kind is registered once. Shutdown hands the shards over:
// none is served any more.
func TestJoinServesAndLeaves(t *testing.T) {
	n, err := Join(testConfig(t, testenv.Redis(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cfg.Shards.Ready(t.Context()); err != nil {
		t.Fatalf("ready after a join: %v", err)
	}
	holder, ok := n.Holder()
	if !ok {
		t.Fatal("Holder: the transport does not listen")
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "every shard served", func() bool { return n.cfg.Shards.Served() == cluster.NumShards })

	echo := func(_ context.Context, c peer.Call) (peer.Reply, error) { return peer.Reply{Value: c.Argument}, nil }
	if err := n.Handle("test.echo", echo); err != nil {
		t.Fatal(err)
	}
	if err := n.Handle("test.echo", echo); err == nil {
		t.Error("a second registration of a kind: nil, want an error")
	}
	addr := holder[len(n.id)+1:]
	reply, err := n.Forward(t.Context(), addr, peer.Call{ComponentID: "test.echo", Method: "m", Argument: json.RawMessage(`"hi"`)})
	if err != nil || string(reply.Value) != `"hi"` {
		t.Errorf("forward a registered kind: %s, %v; want \"hi\"", reply.Value, err)
	}
	// An entity command of no registered component: the entity layer's
	// answer, not the kind's.
	if _, err := n.Forward(t.Context(), addr, peer.Call{ComponentID: "nobody", Method: "m", EntityID: "e"}); !errors.Is(err, peer.ErrNotFound) {
		t.Errorf("forward an unknown component's command: %v, want ErrNotFound", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := n.cfg.Shards.Served(); got != 0 {
		t.Errorf("shards served after Shutdown: %d, want 0", got)
	}
}

// TestJoinFailures: a Redis that does not answer starts the node unready
// (it joins once Redis answers; its transport is not up), and a port
// taken is an error wrapping ErrListen that names the setting.
func TestJoinFailures(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	deadRedis := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer deadRedis.Close()
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		listen string
		secret []byte
		err    error
	}{
		{name: "Redis does not answer", client: deadRedis, listen: "127.0.0.1:0"},
		{name: "port taken", client: testenv.Redis(t), listen: taken.Addr().String(), secret: []byte("node-test-secret-0123456789abcdef"), err: ErrListen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.client)
			cfg.Listen, cfg.Secret = tc.listen, tc.secret
			n, err := Join(cfg)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), cfg.ListenSetting) {
					t.Fatalf("Join: %v, want %v naming %s", err, tc.err, cfg.ListenSetting)
				}
				return
			}
			if err != nil {
				t.Fatalf("Join: %v, want an unready node", err)
			}
			if err := cfg.Shards.Ready(t.Context()); !errors.Is(err, components.ErrUnavailable) {
				t.Errorf("ready: %v, want ErrUnavailable (joining)", err)
			}
			if _, ok := n.Holder(); ok {
				t.Error("Holder: the transport listens, want not")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := n.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}
