package trellistest

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// RedisURLEnv is the environment variable that points tests at a real
// Redis, redis://host:port/db.
const RedisURLEnv = testenv.RedisURLEnv

// RedisURL returns the Redis URL of TRELLIS_TEST_REDIS_URL, for
// WithRedisURL; when the variable is empty, that of a throwaway
// redis-server the test binary starts (redis-server from PATH) and its
// tests share (see Servers). If neither is possible it fails the test,
// saying why: a test that needs Redis never skips.
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
// for a Config's RedisClusterURL; when the variable is empty, that of a
// throwaway Redis Cluster (3 masters, 3 replicas) the test binary starts
// and its tests share (see Servers). If neither is possible it fails the
// test, saying why. Under go test -short it skips the test: a cluster's
// cases run in the full run, the quick loop runs those on one Redis.
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
// ends. Under go test -short it skips the test, as RedisClusterURL does.
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

// Servers runs a package's tests and then stops the throwaway Redis and
// Redis Cluster they started (RedisURL, RedisClusterURL):
//
//	func TestMain(m *testing.M) { os.Exit(trellistest.Servers(m).Run()) }
//
// or goleak.VerifyTestMain(trellistest.Servers(m)). Without it the
// kernel still stops them when the test binary exits.
func Servers(m *testing.M) interface{ Run() int } { return testenv.Servers(m) }
