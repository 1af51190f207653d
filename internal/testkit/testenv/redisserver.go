package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server of a test's own, for what must not touch
// the shared test Redis: stopping it, freezing it, restarting it with
// persistence, FLUSHALL, memory figures.
type RedisServer struct {
	t    testing.TB
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
}

// StartRedisServer starts redis-server (from PATH) on a free loopback port,
// without persistence unless args turn it on, with its files in a temp dir,
// plus args; it is stopped (and thawed first, if frozen) when the test ends.
func StartRedisServer(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	for try := 1; ; try++ {
		r := newRedisServer(t, FreePort(t), args)
		err := r.launch()
		if err == nil {
			return r
		}
		if !errors.Is(err, errPortTaken) || try == portTries {
			t.Fatal(err)
		}
	}
}

// portTries is how many free ports StartRedisServer tries: another
// process may take a port between its check and redis-server's bind.
const portTries = 5

// errPortTaken is a launch's error when something else took the port
// first.
var errPortTaken = errors.New("the port was taken by another process")

// FreePort is a loopback TCP port that was free a moment ago: for a server
// that a test starts later on a port it names now.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// StartRedisServerOn is StartRedisServer on the given port.
func StartRedisServerOn(t testing.TB, port int, args ...string) *RedisServer {
	t.Helper()
	r := newRedisServer(t, port, args)
	r.start()
	return r
}

// newRedisServer is a server on port, not started, stopped when the test
// ends.
func newRedisServer(t testing.TB, port int, args []string) *RedisServer {
	r := &RedisServer{t: t, dir: t.TempDir(), port: port, args: args}
	t.Cleanup(r.Stop)
	return r
}

// start runs the server on r's port and dir and waits until it answers.
func (r *RedisServer) start() {
	r.t.Helper()
	if err := r.launch(); err != nil {
		r.t.Fatal(err)
	}
}

// launch is start, reporting what went wrong: an error wrapping
// errPortTaken when the server could not bind its port, or another
// server answers there.
func (r *RedisServer) launch() error {
	all := append([]string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(r.dir, "redis.log")}, r.args...)
	cmd, err := redisServer(all...)
	if err != nil {
		return err
	}
	r.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer c.Close()
	var answered, taken bool
	poll(10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if ours, err := answersAs(ctx, c, cmd.Process.Pid); err == nil {
			answered, taken = ours, !ours
		} else {
			taken = strings.Contains(r.Log(), "Address already in use")
		}
		return answered || taken
	})
	if answered {
		return nil
	}
	r.Stop()
	if taken {
		return fmt.Errorf("redis-server on %s: %w", r.Addr(), errPortTaken)
	}
	return fmt.Errorf("redis-server on %s did not answer within 10 s:\n%s", r.Addr(), r.Log())
}

// answersAs reports whether the Redis c reaches is the process pid: a
// free port may have been taken by another test's server meanwhile.
func answersAs(ctx context.Context, c *redis.Client, pid int) (bool, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return v == strconv.Itoa(pid), nil
		}
	}
	return false, errors.New("INFO server names no process_id")
}

// installHint says how to get redis-server (and redis-cli, which comes
// with it).
const installHint = "redis-server is not on PATH: install it (apt-get install redis-server)"

// redisServer starts redis-server from PATH with args. Should the test
// binary die without stopping it, the kernel kills it (Pdeathsig).
func redisServer(args ...string) (*exec.Cmd, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New(installHint)
	}
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	return cmd, nil
}

// Addr is the server's host:port.
func (r *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// URL is the server's redis:// URL, database 0.
func (r *RedisServer) URL() string { return "redis://" + r.Addr() + "/0" }

// Client returns a client for the server, closed when the test ends.
func (r *RedisServer) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop kills the server and waits for it: from then on, connections to
// its port are refused. Stopping twice is harmless.
func (r *RedisServer) Stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT) // a frozen server cannot die of SIGKILL's reaping otherwise
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Restart shuts the server down gracefully (SIGTERM: with AOF on, it
// fsyncs and exits) and starts it again on the same port, dir and args.
func (r *RedisServer) Restart() {
	r.t.Helper()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		_ = r.cmd.Wait()
		r.cmd = nil
	}
	r.start()
}

// Freeze stops the server with SIGSTOP: connections are still accepted by
// the kernel, but nothing is answered, as with a hung Redis.
func (r *RedisServer) Freeze() {
	r.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		r.t.Fatalf("freeze redis-server: %v", err)
	}
}

// Thaw resumes a frozen server (SIGCONT).
func (r *RedisServer) Thaw() {
	r.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		r.t.Fatalf("thaw redis-server: %v", err)
	}
}

// Log is the server's log, for failure messages.
func (r *RedisServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
	return string(b)
}
