package testenv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClusterURLEnv is the environment variable that points tests at a
// real Redis Cluster, in go-redis's cluster URL form:
// redis://host:port?addr=host:port&addr=host:port.
const RedisClusterURLEnv = "TRELLIS_TEST_REDIS_CLUSTER_URL"

// RedisClusterURL returns the cluster URL from TRELLIS_TEST_REDIS_CLUSTER_URL
// or, when it is empty, that of the test binary's shared throwaway cluster
// (see shared.go). If that cannot start, it fails the test saying why.
func RedisClusterURL(t testing.TB) string {
	t.Helper()
	ClusterCase(t)
	return serverURL(t, RedisClusterURLEnv, "a real Redis Cluster", sharedClusterURL)
}

// RedisCluster returns a cluster client for the cluster at RedisClusterURL,
// after checking that every master answers PING within 5 s. The client is
// closed when the test ends.
func RedisCluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	url := RedisClusterURL(t)
	opts, err := redis.ParseClusterURL(url)
	if err != nil {
		t.Fatalf("%s=%q: %v", RedisClusterURLEnv, url, err)
	}
	client := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = client.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	})
	if err != nil {
		t.Fatalf("cannot reach every master of the Redis Cluster at %s (%s): %v", url, RedisClusterURLEnv, err)
	}
	return client
}

// RedisTarget is one kind of Redis deployment a test runs against.
type RedisTarget struct {
	// Name names it in subtest names: "redis" or "cluster".
	Name string
	// Connect returns a new client for it (closed when the test ends),
	// or fails the test when it is not configured.
	Connect func(t testing.TB) redis.UniversalClient
}

// RedisTargets are one Redis and a Redis Cluster: the suites that must
// hold on both (the stores' conformance suites) run once per target.
var RedisTargets = []RedisTarget{
	{Name: "redis", Connect: func(t testing.TB) redis.UniversalClient { return Redis(t) }},
	{Name: "cluster", Connect: func(t testing.TB) redis.UniversalClient { return RedisCluster(t) }},
}

// DeleteKeys removes every key matching pattern, on one Redis or on every
// master of a cluster (SCAN + DEL, one key at a time on a cluster, since
// the keys may be in different slots). It runs with a context of its own
// (a test's is already done when its cleanups run) and reports failures
// with t.Errorf.
func DeleteKeys(t testing.TB, client redis.UniversalClient, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := func(ctx context.Context, node redis.UniversalClient) error {
		var keys []string
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		// UNLINK one key per command, pipelined: a cluster refuses a
		// multi-key command across slots, and one Redis does not mind.
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Unlink(ctx, k)
			}
			return nil
		})
		return err
	}
	var err error
	if cc, ok := client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var masterErrs error
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			e := del(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			masterErrs = errors.Join(masterErrs, e)
			return nil
		})
		err = errors.Join(err, masterErrs)
	} else {
		err = del(ctx, client)
	}
	if err != nil {
		t.Errorf("delete keys %s: %v", pattern, err)
	}
}

// KeysPerMaster counts the keys matching pattern on each master of a
// cluster (SCAN on each), by master address: how a service's keys are
// spread.
func KeysPerMaster(t testing.TB, client *redis.ClusterClient, pattern string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	counts := make(map[string]int)
	err := client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n := 0
		iter := m.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		mu.Lock()
		counts[m.Options().Addr] = n
		mu.Unlock()
		return iter.Err()
	})
	if err != nil {
		t.Fatalf("count keys %s per master: %v", pattern, err)
	}
	return counts
}
