package trellistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/cluster"
)

// StartInstances starts n instances of the service that setup makes, as
// one cluster: on one Redis (WithRedisURL, else RedisURL(t)) and one key
// prefix of their own, each with its cluster port on a free loopback port
// and a cluster secret they share. Every entity has one owner among them
// and any instance reaches any entity. opts apply to every instance.
//
// The instances stop when the test ends (gracefully, handing their shards
// over), and the prefix's keys are removed. Use WaitSettled before a test
// counts on where the shards are.
func StartInstances(t testing.TB, n int, setup trellis.Setup, opts ...Option) []*Service {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	url := o.redisURL
	if url == "" {
		url = RedisURL(t)
	}
	prefix := o.prefix
	if prefix == "" {
		prefix = "trellis-test-" + rand.Text()
		t.Cleanup(func() { // registered first: runs after every instance stopped
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := deleteKeys(ctx, url, prefix); err != nil {
				t.Errorf("remove the test's Redis keys: %v", err)
			}
		})
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	cluster := []Option{WithRedisURL(url), WithStorePrefix(prefix), WithConfig(func(c *trellis.Config) {
		c.ClusterAddr = "127.0.0.1:0"
		c.ClusterSecret = hex.EncodeToString(secret)
	})}
	out := make([]*Service, n)
	for i := range out {
		out[i] = Start(t, setup, append(cluster, opts...)...)
	}
	return out
}

// JoinInstance starts one more instance of the cluster that like belongs
// to (one StartInstances started): the same Redis, prefix and cluster
// secret. It stops when the test ends, like the others.
func JoinInstance(t testing.TB, like *Service, setup trellis.Setup, opts ...Option) *Service {
	t.Helper()
	cfg := like.Host().Config
	join := []Option{WithRedisURL(cfg.RedisURL), WithStorePrefix(cfg.RedisPrefix), WithConfig(func(c *trellis.Config) {
		c.ClusterAddr = "127.0.0.1:0"
		c.ClusterSecret = cfg.ClusterSecret
	})}
	return Start(t, setup, append(join, opts...)...)
}

// WaitSettled waits (at most a minute) until the instances that are
// still running serve every shard between them, each within one shard
// of an even share: the rebalancing after a start, a stop or a kill is
// over.
func WaitSettled(t testing.TB, instances ...*Service) {
	t.Helper()
	const shards = cluster.NumShards
	Eventually(t, time.Minute, "the instances serve every shard, evenly", func() bool {
		total, lo, hi := 0, shards, 0
		for _, ts := range instances {
			n := ts.ShardsServed()
			total, lo, hi = total+n, min(lo, n), max(hi, n)
		}
		even := shards / len(instances)
		return total == shards && lo >= even-1 && hi <= even+2
	})
}
