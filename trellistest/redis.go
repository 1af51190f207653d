package trellistest

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testenv"
)

// RedisURLEnv is the environment variable that points tests at a real
// Redis, redis://host:port/db.
const RedisURLEnv = testenv.RedisURLEnv

// RedisURL returns the Redis URL of TRELLIS_TEST_REDIS_URL, for
// WithRedisURL. If the variable is empty it fails the test, saying how to
// run it: a test that needs Redis never skips.
func RedisURL(t testing.TB) string {
	t.Helper()
	return testenv.RedisURL(t)
}

// Redis returns a client for the Redis at RedisURL, after checking that it
// answers a PING within 5 s. The client is closed when the test ends.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	return testenv.Redis(t)
}

// RedisClusterURLEnv is the environment variable that points tests at a
// real Redis Cluster, in go-redis's cluster URL form
// redis://host:port?addr=host:port&addr=host:port.
const RedisClusterURLEnv = testenv.RedisClusterURLEnv

// RedisClusterURL returns the cluster URL of TRELLIS_TEST_REDIS_CLUSTER_URL,
// for a Config's RedisClusterURL. If the variable is empty it fails the
// test, saying how to run it.
func RedisClusterURL(t testing.TB) string {
	t.Helper()
	return testenv.RedisClusterURL(t)
}

// Cluster is a Redis Cluster of a test's own (3 masters, 3 replicas, each
// a redis-server process on a free loopback port), for tests that must
// break one, such as a master killed with Kill9. Its URL is what a
// Config's RedisClusterURL takes.
type Cluster = testenv.Cluster

// ClusterNodeTimeout is a Cluster's cluster-node-timeout: how long a
// master must be unreachable before its replica is promoted (plus an
// election of about a second).
const ClusterNodeTimeout = testenv.NodeTimeout

// StartCluster starts a Cluster with redis-server and redis-cli from PATH,
// each node also given the redis-server arguments args, and waits until
// every node sees the cluster as ok. Every node is stopped when the test
// ends.
func StartCluster(t testing.TB, args ...string) *Cluster {
	t.Helper()
	return testenv.StartCluster(t, args...)
}

// KeysPerMaster counts the keys matching pattern on each master of a
// cluster, by master address: how a service's keys are spread.
func KeysPerMaster(t testing.TB, client *redis.ClusterClient, pattern string) map[string]int {
	t.Helper()
	return testenv.KeysPerMaster(t, client, pattern)
}
