package trellistest

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// RedisServer is a redis-server of a test's own, for faults that must not
// touch the shared test Redis: stopping it (Stop), freezing it (Freeze,
// Thaw), restarting it (Restart). Addr, URL and Client reach it; Log is
// its log, for failure messages. StartRedisServer and StartRedisServerOn
// make one.
type RedisServer struct {
	s *testenv.RedisServer
}

// StartRedisServer starts redis-server (from PATH) on a free loopback port,
// without persistence unless args turn it on, with its files in a temp dir,
// plus args; it is stopped (and thawed first, if frozen) when the test ends.
func StartRedisServer(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	return &RedisServer{s: testenv.StartRedisServer(t, args...)}
}

// FreePort is a loopback TCP port that was free a moment ago: for a server
// that a test starts later on a port it names now.
func FreePort(t testing.TB) int {
	t.Helper()
	return testenv.FreePort(t)
}

// StartRedisServerOn is StartRedisServer on the given port.
func StartRedisServerOn(t testing.TB, port int, args ...string) *RedisServer {
	t.Helper()
	return &RedisServer{s: testenv.StartRedisServerOn(t, port, args...)}
}

// Addr is the server's host:port on loopback.
func (r *RedisServer) Addr() string { return r.s.Addr() }

// URL is the server's redis:// URL, database 0: what WithRedisURL takes.
func (r *RedisServer) URL() string { return r.s.URL() }

// Client returns a client for the server, closed when the test ends.
func (r *RedisServer) Client(t testing.TB) *redis.Client { return r.s.Client(t) }

// Stop kills the server and waits for it: from then on, connections to
// its port are refused. Stopping twice is harmless.
func (r *RedisServer) Stop() { r.s.Stop() }

// Restart shuts the server down gracefully (SIGTERM: with AOF on, it
// fsyncs and exits) and starts it again on the same port, dir and args.
func (r *RedisServer) Restart() { r.s.Restart() }

// Freeze stops the server with SIGSTOP: connections are still accepted by
// the kernel, but nothing is answered, as with a hung Redis. Thaw resumes
// it; a frozen server is thawed before it is stopped at the test's end.
func (r *RedisServer) Freeze() { r.s.Freeze() }

// Thaw resumes a frozen server (SIGCONT).
func (r *RedisServer) Thaw() { r.s.Thaw() }

// Log is the server's log, for failure messages.
func (r *RedisServer) Log() string { return r.s.Log() }
