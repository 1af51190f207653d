package timers

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server of a test's own, for what must not touch
// the shared test Redis: restarts, persistence, FLUSHALL, memory figures.
type redisServer struct {
	t    testing.TB
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
}

// startRedisServer starts redis-server (from PATH) on a free loopback
// port with its files in a temp dir, plus args; it is stopped when the
// test ends.
func startRedisServer(t testing.TB, args ...string) *redisServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	r := &redisServer{t: t, dir: t.TempDir(), port: port, args: args}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *redisServer) start() {
	r.t.Helper()
	args := append([]string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--daemonize", "no", "--logfile", filepath.Join(r.dir, "redis.log")}, r.args...)
	r.cmd = exec.Command("redis-server", args...)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server (it must be on PATH): %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer c.Close()
	waitFor(r.t, "redis-server to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	})
}

// stop shuts the server down gracefully (SIGTERM: with AOF on, it fsyncs
// and exits) and waits for it.
func (r *redisServer) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
	r.cmd = nil
}

// restart stops the server and starts it again on the same port and dir.
func (r *redisServer) restart() {
	r.t.Helper()
	r.stop()
	r.start()
}

// client returns a client for the server, closed when the test ends.
func (r *redisServer) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.addr(), DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// log returns the server's log, for failure messages.
func (r *redisServer) log() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
	return string(b)
}
