package trellistest

import (
	"testing"

	"github.com/trellis-go/trellis/internal/testenv"
)

// RedisServer is a redis-server of a test's own, for faults that must not
// touch the shared test Redis: stopping it (Stop), freezing it (Freeze,
// Thaw), restarting it (Restart). Addr, URL and Client reach it; Log is
// its log, for failure messages.
type RedisServer = testenv.RedisServer

// StartRedisServer starts redis-server (from PATH) on a free loopback port,
// without persistence unless args turn it on, with its files in a temp dir,
// plus args; it is stopped (and thawed first, if frozen) when the test ends.
func StartRedisServer(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	return testenv.StartRedisServer(t, args...)
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
	return testenv.StartRedisServerOn(t, port, args...)
}
