package trellis_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/trellistest"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestClusterRejoinsAfterLostMembership: an instance whose Redis is out of
// reach for longer than the lease loses its membership (the other takes
// its shards); once Redis is back it joins again, takes its share anew,
// and serves commands.
func TestClusterRejoinsAfterLostMembership(t *testing.T) {
	testenv.Long(t)
	url := trellistest.RedisURL(t)
	app := &fixture.CounterApp{}
	quiet := trellistest.WithLogger(slog.New(slog.DiscardHandler))
	lease := trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = time.Second })
	a := trellistest.StartInstances(t, 1, app.Setup, quiet, lease)[0]
	cfg := a.Host().Config
	// b reaches Redis through a proxy that can cut it off.
	addr := strings.TrimPrefix(url, "redis://")
	addr, _, _ = strings.Cut(addr, "/")
	proxy := peertest.NewProxy(t, addr)
	b := trellistest.StartInstances(t, 1, app.Setup, quiet, lease,
		trellistest.WithRedisURL(strings.Replace(url, addr, proxy.Addr(), 1)), trellistest.WithStorePrefix(cfg.RedisPrefix),
		trellistest.WithConfig(func(c *trellis.Config) { c.ClusterSecret = cfg.ClusterSecret }))[0]
	trellistest.WaitSettled(t, a, b)

	proxy.Refuse(true) // Redis out of reach
	proxy.Cut()
	trellistest.Eventually(t, 30*time.Second, "the other instance serves every shard", func() bool {
		return a.ShardsServed() == 256 && b.ShardsServed() == 0
	})
	proxy.Refuse(false)
	trellistest.WaitSettled(t, a, b)
	for i := range 5 {
		if c := fixture.Counter(t, b.Post(t, "/counters/rejoined/increase", map[string]int{"by": 1})); c.Value != int64(i+1) {
			t.Fatalf("increase %d through the instance that joined again: %d", i, c.Value)
		}
	}
}
