package trellistest

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildBinary builds the main package pkg (an import path: your service's
// command) into the test's temporary directory and returns the binary's
// path: a test of the binary runs what is deployed.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Process is a service's binary running as a process of the test.
type Process struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process was waited for
	mu     sync.Mutex
	log    []string
}

// StartProcess starts the service binary bin (BuildBinary) with env — the
// test's environment without its TRELLIS_ variables, plus env (such as
// TRELLIS_REDIS_URL=...) — listening on a free loopback port (and its
// cluster port on another), logging at info (StartProcess reads its
// "listening" line: a later TRELLIS_LOG_LEVEL in env must keep it), waits (at most 30 s) until it listens and
// /readyz answers 200, and stops it when the test ends: SIGTERM, then
// SIGKILL if it has not exited within 20 s. Its log (stderr) is printed
// when the test fails.
func StartProcess(t testing.TB, bin string, env ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRELLIS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TRELLIS_HTTP_ADDR=127.0.0.1:0", "TRELLIS_CLUSTER_ADDR=127.0.0.1:0", "TRELLIS_LOG_LEVEL=info")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				select {
				case listening <- rec.Addr:
				default:
				}
			}
			p.mu.Lock()
			p.log = append(p.log, sc.Text())
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("log of %s (%s):\n%s", bin, p.URL, p.tail(60))
		}
	})
	select {
	case addr := <-listening:
		p.URL = "http://" + addr
	case <-p.exited:
		t.Fatalf("%s exited before it listened:\n%s", bin, p.tail(40))
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not listen within 30 s:\n%s", bin, p.tail(40))
	}
	Eventually(t, 30*time.Second, p.URL+" is ready", func() bool {
		resp, err := http.Get(p.URL + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// Kill9 kills the process with SIGKILL, as a crash does: no shutdown, no
// hand-over, nothing more told to Redis. It returns once the process is
// gone.
func (p *Process) Kill9(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 %s: %v", p.URL, err)
	}
	<-p.exited
}

// stop ends the process with SIGTERM, or SIGKILL after 20 s; a process
// already gone is left alone.
func (p *Process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// tail is the last n lines of the process's log.
func (p *Process) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log[max(0, len(p.log)-n):], "\n")
}
