package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestSetup runs the server's own setup in the test kit, on both stores:
// the samples' routes are wired.
func TestSetup(t *testing.T) {
	tests := []struct {
		name string               // case name
		opts []trellis.TestOption // the store
	}{
		{name: "memory"},
		{name: "redis", opts: []trellis.TestOption{trellis.WithRedisURL(testenv.RedisURL(t))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := trellis.StartTest(t, setup(defaultSamples()), tt.opts...)
			resp := ts.Post(t, "/counters/setup-check/increase", map[string]int{"by": 2})
			var c api.Counter
			resp.JSON(t, &c)
			if resp.Status != http.StatusOK || c.Value != 2 {
				t.Fatalf("POST increase: %d %s", resp.Status, resp.Body)
			}
			// The order sample: its entity, timed action and timer are wired.
			resp = ts.Post(t, "/orders", map[string]any{"item": "setup-check", "quantity": 1})
			var o api.Order
			resp.JSON(t, &o)
			if resp.Status != http.StatusCreated || !o.Placed {
				t.Fatalf("POST /orders: %d %s", resp.Status, resp.Body)
			}
			// Past the expiry by more than the store's millisecond rounding;
			// then a second more on each poll, in case the scheduler's loop
			// had not yet armed its timer on the test clock when it moved.
			ts.Clock.Advance(defaultOrderExpiry + time.Second)
			deadline := time.Now().Add(10 * time.Second)
			for ts.Get(t, "/orders/"+o.Id).Status != http.StatusNotFound {
				if time.Now().After(deadline) {
					t.Fatal("the order did not expire within 10 s (real time) of its expiry on the test clock")
				}
				time.Sleep(10 * time.Millisecond)
				ts.Clock.Advance(time.Second)
			}
		})
	}
}

// buildServer builds ./cmd/server into a temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is the test's environment without any TRELLIS_ variable, plus
// extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRELLIS_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestBinary builds the server, starts it with the embedded store on a free
// port, waits for /healthz, does a counter round trip, sends SIGTERM and
// expects a clean exit (code 0) within a bounded time.
func TestBinary(t *testing.T) {
	bin := buildServer(t)
	cmd := exec.Command(bin)
	cmd.Env = cleanEnv("TRELLIS_HTTP_ADDR=127.0.0.1:0", "TRELLIS_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1) // receives Wait's result once
	logLines := make(chan string, 1024)
	go func() {
		// The log is read to its end before Wait, as exec requires.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case logLines <- sc.Text():
			default: // the test stopped reading: drop
			}
		}
		close(logLines)
		exited <- cmd.Wait()
	}()
	stopped := false // set once the exit was seen
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	// The address comes from the "listening" log line, since the port was
	// chosen by the kernel; the in-memory store must be announced loudly.
	var addr string
	var warned bool
	var seen []string
	deadline := time.After(30 * time.Second)
	for addr == "" {
		select {
		case line, ok := <-logLines:
			if !ok {
				stopped = true
				t.Fatalf("the server exited before listening: %v\n%s", <-exited, strings.Join(seen, "\n"))
			}
			seen = append(seen, line)
			var rec struct{ Level, Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil {
				if rec.Level == "WARN" && strings.Contains(rec.Msg, "NOT durable") {
					warned = true
				}
				if rec.Msg == "listening" {
					addr = rec.Addr
				}
			}
		case <-deadline:
			t.Fatalf("no \"listening\" log line within 30 s:\n%s", strings.Join(seen, "\n"))
		}
	}
	if !warned {
		t.Errorf("no WARN that the in-memory store is not durable:\n%s", strings.Join(seen, "\n"))
	}
	base := "http://" + addr
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()

	if status, body := call(t, client, http.MethodGet, base+"/healthz", ""); status != http.StatusOK {
		t.Fatalf("/healthz: %d %s", status, body)
	}
	if status, body := call(t, client, http.MethodPost, base+"/counters/bin/increase", `{"by":7}`); status != http.StatusOK || !strings.Contains(body, `"value":7`) {
		t.Fatalf("POST increase: %d %s", status, body)
	}
	if status, body := call(t, client, http.MethodGet, base+"/counters/bin", ""); status != http.StatusOK || !strings.Contains(body, `"value":7`) {
		t.Fatalf("GET: %d %s", status, body)
	}
	client.CloseIdleConnections()
	// The image's HEALTHCHECK: the binary checks the server next to it.
	if out, err := runHealthcheck(bin, addr); err != nil {
		t.Fatalf("-healthcheck against the running server: %v, want exit code 0; output:\n%s", err, out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range logLines { // keep draining until the process exits
		}
	}()
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want exit code 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not exit within 20 s of SIGTERM")
	}
	out, err := runHealthcheck(bin, addr)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "unhealthy") {
		t.Fatalf("-healthcheck after the server stopped: %v, want exit code 1 saying unhealthy; output:\n%s", err, out)
	}
}

// runHealthcheck runs `bin -healthcheck` as the image's HEALTHCHECK does,
// with TRELLIS_HTTP_ADDR=addr, and returns its output and exit error.
func runHealthcheck(bin, addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-healthcheck")
	cmd.Env = cleanEnv("TRELLIS_HTTP_ADDR=" + addr)
	return cmd.CombinedOutput()
}

// TestBinaryInvalidConfig: an invalid setting stops the server at start-up
// with exit code 2 and a message naming the variable.
func TestBinaryInvalidConfig(t *testing.T) {
	bin := buildServer(t)
	tests := []struct {
		name string // case name
		env  string // the bad setting
		want string // the variable the message must name
	}{
		{name: "log level", env: "TRELLIS_LOG_LEVEL=verbose", want: "TRELLIS_LOG_LEVEL"},
		{name: "redis URL", env: "TRELLIS_REDIS_URL=http://nope", want: "TRELLIS_REDIS_URL"},
		{name: "address", env: "TRELLIS_HTTP_ADDR=nowhere", want: "TRELLIS_HTTP_ADDR"},
		{name: "redis prefix with a trailing colon", env: "TRELLIS_REDIS_PREFIX=shop:", want: "TRELLIS_REDIS_PREFIX"},
		{name: "redis prefix with a glob character", env: "TRELLIS_REDIS_PREFIX=shop*", want: "TRELLIS_REDIS_PREFIX"},
		{name: "order expiry not a duration", env: "TRELLIS_ORDER_EXPIRY=10", want: "TRELLIS_ORDER_EXPIRY"},
		{name: "order expiry zero", env: "TRELLIS_ORDER_EXPIRY=0s", want: "TRELLIS_ORDER_EXPIRY"},
		{name: "order expiry negative", env: "TRELLIS_ORDER_EXPIRY=-5s", want: "TRELLIS_ORDER_EXPIRY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = cleanEnv(tt.env)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("err = %v, want exit code 2; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Fatalf("output does not name %s:\n%s", tt.want, out)
			}
		})
	}
}

func call(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(fmt.Errorf("read %s %s: %w", method, url, err))
	}
	return resp.StatusCode, string(b)
}
