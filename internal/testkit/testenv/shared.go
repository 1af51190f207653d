package testenv

import (
	"errors"
	"os"
	"sync"
	"testing"
)

// The shared servers. When RedisURLEnv (RedisClusterURLEnv) is empty, the
// first test that asks for it starts a throwaway redis-server (a Redis
// Cluster of 3 masters and 3 replicas) of the test binary's own, on free
// loopback ports without persistence, which every later test of the
// binary shares; so plain `go test` works on a machine with redis-server
// on PATH. A package's TestMain runs its tests through Servers, which
// stops them by PID when the tests end; should the binary die first, the
// kernel kills them (Pdeathsig, see redisServer).
var shared struct {
	redisOnce, clusterOnce sync.Once
	redis                  *RedisServer
	cluster                *Cluster
	redisURL, clusterURL   string
	redisErr, clusterErr   error
}

// sharedRedisURL is the URL of the shared redis-server, started on first
// use.
func sharedRedisURL() (string, error) {
	shared.redisOnce.Do(func() {
		dir, err := os.MkdirTemp("", "trellis-test-redis-")
		if err != nil {
			shared.redisErr = err
			return
		}
		for try := 1; ; try++ {
			port, err := freePort()
			if err != nil {
				shared.redisErr = err
				return
			}
			r := &RedisServer{dir: dir, port: port}
			err = r.launch()
			if err == nil {
				shared.redis, shared.redisURL = r, r.URL()
				return
			}
			if !errors.Is(err, errPortTaken) || try == portTries {
				_ = os.RemoveAll(dir)
				shared.redisErr = err
				return
			}
		}
	})
	return shared.redisURL, shared.redisErr
}

// sharedClusterURL is the URL of the shared Redis Cluster, started on
// first use.
func sharedClusterURL() (string, error) {
	shared.clusterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "trellis-test-cluster-")
		if err != nil {
			shared.clusterErr = err
			return
		}
		c := &Cluster{dir: dir}
		if err := c.start(); err != nil {
			c.stop()
			_ = os.RemoveAll(dir)
			shared.clusterErr = err
			return
		}
		shared.cluster, shared.clusterURL = c, c.URL()
	})
	return shared.clusterURL, shared.clusterErr
}

// stopShared stops the shared servers that were started, by their PIDs,
// and removes their directories.
func stopShared() {
	if r := shared.redis; r != nil {
		r.Stop()
		_ = os.RemoveAll(r.dir)
	}
	if c := shared.cluster; c != nil {
		c.stop()
		_ = os.RemoveAll(c.dir)
	}
}

// Servers wraps a package's tests so that the shared servers they started
// are stopped when they end:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }
//
// or os.Exit(testenv.Servers(m).Run()) without goleak.
func Servers(m *testing.M) interface{ Run() int } { return servers{m} }

type servers struct{ m *testing.M }

func (s servers) Run() int {
	defer stopShared()
	return s.m.Run()
}

// serverURL returns the variable name when it is set, else the URL of the
// shared server start returns, failing the test (saying what to install
// or set) when it cannot start.
func serverURL(t testing.TB, name, what string, start func() (string, error)) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	url, err := start()
	if err != nil {
		t.Fatalf("this test needs %s: %s is not set and a throwaway one did not start: %v", what, name, err)
	}
	return url
}
