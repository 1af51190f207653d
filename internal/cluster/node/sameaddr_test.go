package node

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// TestHoldsAddr: the process holds an advertised address only when its
// port is the one bound, on an address of this machine the listener
// covers.
func TestHoldsAddr(t *testing.T) {
	tests := []struct {
		name, advertise, bound string
		want                   bool
	}{
		{"loopback, bound on it", "127.0.0.1:7000", "127.0.0.1:7000", true},
		{"loopback, bound on every address", "127.0.0.1:7000", "[::]:7000", true},
		{"localhost by name", "localhost:7000", "[::]:7000", true},
		{"another port", "127.0.0.1:7001", "127.0.0.1:7000", false},
		{"bound on another address", "127.0.0.1:7000", "127.0.0.2:7000", false},
		{"an address of another machine", "192.0.2.1:7000", "[::]:7000", false},
		{"a name that does not resolve", "no-such-host.invalid:7000", "[::]:7000", false},
		{"no port", "127.0.0.1", "127.0.0.1:7000", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := holdsAddr(context.Background(), tt.advertise, tt.bound); got != tt.want {
				t.Errorf("holdsAddr(%q, %q) = %v, want %v", tt.advertise, tt.bound, got, tt.want)
			}
		})
	}
}

// TestRestartInPlace: a node serving every shard crashes (no goodbye) and
// a new one starts on the same address, as a container restarted in its
// pod: it serves every shard within half a lease of the old one's last
// renewal and a few moves, before the old lease would have lapsed.
func TestRestartInPlace(t *testing.T) {
	testenv.Long(t)
	const lease = 6 * time.Second
	cfg := testConfig(t, testenv.Redis(t))
	cfg.Lease = lease
	old, err := Join(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "every shard served", func() bool { return cfg.Shards.Served() == cluster.NumShards })
	holder, _ := old.Holder()
	addr := holder[len(old.id)+1:]
	old.Crash()
	crashed := time.Now()

	again := cfg
	again.Listen, again.Shards = addr, NewShards()
	again.System = runtime.NewSystem("node-test-again")
	t.Cleanup(func() { _ = again.System.Shutdown(context.Background()) })
	n, err := Join(again)
	if err != nil {
		t.Fatalf("join again on %s: %v", addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The old lease lapses 4 to 6 s after the crash (its last renewal was
	// 0 to 2 s before it); waiting for it would serve nothing before then.
	bound := lease * 2 / 3
	testenv.Eventually(t, bound, "every shard served again before the old lease lapses", func() bool {
		return again.Shards.Served() == cluster.NumShards
	})
	t.Logf("every shard served again %v after the crash", time.Since(crashed))
}
