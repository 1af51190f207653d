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
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(trellistest.Servers(m))
}

// TestSetup runs the server's own setup in the test kit, on both stores:
// the samples' routes are wired.
func TestSetup(t *testing.T) {
	tests := []struct {
		name string               // case name
		opts []trellistest.Option // the store
	}{
		{name: "memory"},
		{name: "redis", opts: []trellistest.Option{trellistest.WithRedisURL(trellistest.RedisURL(t))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := append(slices.Clone(tt.opts), trellistest.WithServiceOptions(trellis.WithContract(contract.Spec)))
			ts := trellistest.Start(t, setup(&samples{}), opts...)
			resp := ts.Post(t, "/counters/setup-check/increase", map[string]int{"by": 2})
			var c contract.Counter
			resp.JSON(t, &c)
			if resp.Status != http.StatusOK || c.Value != 2 {
				t.Fatalf("POST increase: %d %s", resp.Status, resp.Body)
			}
			// The order sample: its entity, timed action and timer are wired.
			resp = ts.Post(t, "/orders", map[string]any{"item": "setup-check", "quantity": 1})
			var o contract.Order
			resp.JSON(t, &o)
			if resp.Status != http.StatusCreated || !o.Placed {
				t.Fatalf("POST /orders: %d %s", resp.Status, resp.Body)
			}
			// Exactly the expiry: the timer is due, runs and cancels the order.
			ts.AdvanceTimers(t, defaultOrderExpiry)
			if resp := ts.Get(t, "/orders/"+o.Id); resp.Status != http.StatusNotFound {
				t.Fatalf("GET the expired order: %d %s, want 404", resp.Status, resp.Body)
			}
			// The server serves the samples' contract.
			if resp := ts.Get(t, "/openapi.yaml"); resp.Status != http.StatusOK || string(resp.Body) != string(contract.Spec) {
				t.Fatalf("GET /openapi.yaml: %d, %d bytes; want the samples' contract", resp.Status, len(resp.Body))
			}
		})
	}
}

// buildServer builds ./cmd/server into a temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	trellistest.Long(t)
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
		name string   // case name
		env  string   // the bad setting, as a variable
		args []string // or as flags
		want string   // what the message must name
	}{
		{name: "log level", env: "TRELLIS_LOG_LEVEL=verbose", want: "TRELLIS_LOG_LEVEL"},
		{name: "redis URL", env: "TRELLIS_REDIS_URL=http://nope", want: "TRELLIS_REDIS_URL"},
		{name: "address", env: "TRELLIS_HTTP_ADDR=nowhere", want: "TRELLIS_HTTP_ADDR"},
		{name: "redis prefix with a trailing colon", env: "TRELLIS_REDIS_PREFIX=shop:", want: "TRELLIS_REDIS_PREFIX"},
		{name: "redis prefix with a glob character", env: "TRELLIS_REDIS_PREFIX=shop*", want: "TRELLIS_REDIS_PREFIX"},
		{name: "order expiry not a duration", env: "TRELLIS_ORDER_EXPIRY=10", want: "TRELLIS_ORDER_EXPIRY"},
		{name: "order expiry zero", env: "TRELLIS_ORDER_EXPIRY=0s", want: "TRELLIS_ORDER_EXPIRY"},
		{name: "order expiry negative", env: "TRELLIS_ORDER_EXPIRY=-5s", want: "TRELLIS_ORDER_EXPIRY"},
		{name: "order expiry flag", env: "", args: []string{"-order-expiry", "soon"}, want: "TRELLIS_ORDER_EXPIRY (-order-expiry)"},
		{name: "unknown flag", env: "", args: []string{"-nope"}, want: "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.args...)
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

// goList runs go list with args in the module and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// The server binary links no test code: neither package testing nor a
// test kit (trellistest, or any package under a testkit folder).
func TestServerLinksNoTesting(t *testing.T) {
	deps := goList(t, "-deps", ".")
	if !slices.Contains(deps, "github.com/trellis-go/trellis") {
		t.Fatalf("go list -deps does not list package trellis: %v", deps)
	}
	for _, dep := range deps {
		if dep == "testing" || strings.HasSuffix(dep, "/trellistest") || strings.Contains(dep, "/testkit/") {
			t.Errorf("the server binary links %s", dep)
		}
	}
}

// The samples and their server are written like an outside application:
// they import no internal package of Trellis, in their code or tests.
func TestSamplesImportNoInternalPackage(t *testing.T) {
	const format = "{{.ImportPath}}: {{.Imports}} {{.TestImports}} {{.XTestImports}}"
	for _, line := range goList(t, "-f", format, ".", "github.com/trellis-go/trellis/samples/...") {
		if strings.Contains(line, "github.com/trellis-go/trellis/internal/") {
			t.Errorf("imports an internal package: %s", line)
		}
	}
}
