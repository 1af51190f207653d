package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// server is one running server process.
type server struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	logs *logLines

	exited  chan struct{} // closed once the process was waited for
	waitErr error         // what Wait returned, once exited is closed
}

// clusterEnv is the environment of an instance of a cluster on the Redis
// at redisURL: its HTTP and cluster ports free loopback ones, its lease
// lease, its request timeout timeout.
func clusterEnv(redisURL string, lease, timeout time.Duration) []string {
	return []string{
		trellis.EnvHTTPAddr + "=127.0.0.1:0",
		trellis.EnvClusterAddr + "=127.0.0.1:0",
		trellis.EnvRedisURL + "=" + redisURL,
		trellis.EnvClusterLease + "=" + lease.String(),
		trellis.EnvRequestTimeout + "=" + timeout.String(),
		trellis.EnvLogLevel + "=info",
	}
}

// startServer starts the server binary with the TRELLIS_ variables env
// (and none of the test's own), waits until it listens and is ready, and
// stops it by its PID when the test ends (SIGTERM, then SIGKILL after
// 30 s). Its log's tail is printed if the test failed.
func startServer(t *testing.T, env []string) *server {
	t.Helper()
	s := spawnServer(t, env)
	testenv.Eventually(t, time.Minute, "the server at "+s.base+" is ready", func() bool {
		status, _ := s.get("/readyz")
		return status == http.StatusOK
	})
	return s
}

// spawnServer is startServer up to the server's listening: it does not
// wait for it to be ready.
func spawnServer(t *testing.T, env []string) *server {
	t.Helper()
	cmd := exec.Command(serverBinary(t))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRELLIS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, logs: &logLines{}, exited: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		// The log is read to its end before Wait, as exec requires.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			s.logs.add(line)
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				select {
				case listening <- rec.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("log of the server %s (pid %d):\n%s", s.base, cmd.Process.Pid, s.logs.tail(60))
		}
	})
	select {
	case addr := <-listening:
		s.base = "http://" + addr
	case <-s.exited:
		t.Fatalf("the server exited before listening: %v\n%s", s.waitErr, s.logs.tail(50))
	case <-time.After(time.Minute):
		t.Fatalf("the server did not listen within a minute:\n%s", s.logs.tail(50))
	}
	return s
}

// stop ends the process by its PID with SIGTERM and expects a clean exit
// within 30 s, killing it otherwise. A process already gone is left
// alone.
func (s *server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Errorf("SIGTERM the server: %v", err)
	}
	select {
	case <-s.exited:
		if s.waitErr != nil {
			s.t.Errorf("the server's exit after SIGTERM: %v, want exit code 0", s.waitErr)
		}
	case <-time.After(30 * time.Second):
		s.t.Errorf("the server did not exit within 30 s of SIGTERM; killing it")
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// kill9 kills the process with SIGKILL, as a crash would, and reaps it.
func (s *server) kill9() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatalf("kill -9 the server: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.t.Fatal("the killed server was not reaped within 10 s")
	}
}

// get sends GET path and returns the status and body; status 0 when the
// request failed.
func (s *server) get(path string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// metric reads the first line of /metrics that starts with prefix (a
// series' name and a space, or its name and the start of its labels):
// what follows the prefix up to the value, and the value; ok is false
// when /metrics has no such line.
func (s *server) metric(prefix string) (rest string, value float64, ok bool) {
	status, body := s.get("/metrics")
	if status != http.StatusOK {
		return "", 0, false
	}
	for line := range strings.Lines(body) {
		if after, found := strings.CutPrefix(strings.TrimSpace(line), prefix); found {
			i := strings.LastIndexByte(after, ' ')
			v, err := strconv.ParseFloat(after[i+1:], 64)
			return after[:max(i, 0)], v, err == nil
		}
	}
	return "", 0, false
}

// memberID is the server's member id, as its /metrics names it.
func (s *server) memberID(t *testing.T) string {
	t.Helper()
	var id string
	testenv.Eventually(t, time.Minute, s.base+" names its member id", func() bool {
		labels, v, ok := s.metric(`trellis_cluster_member{member="`)
		id, _, _ = strings.Cut(labels, `"`)
		return ok && v == 1 && id != ""
	})
	return id
}

// metricsPoll is how often a test asks the servers' /metrics while it
// waits for a change: often enough to time a hand-over to a tenth of a
// second, rarely enough that the servers' load is the test's load.
const metricsPoll = 50 * time.Millisecond

// waitSettled waits (at most two minutes) until the servers serve every
// shard between them, each within one shard of an even share.
func waitSettled(t *testing.T, servers ...*server) {
	t.Helper()
	testenv.EventuallyEvery(t, 2*time.Minute, metricsPoll, "the servers serve every shard, evenly", func() bool {
		total, lo, hi := 0, cluster.NumShards, 0
		for _, s := range servers {
			_, v, ok := s.metric("trellis_cluster_shards_served ")
			if !ok {
				return false
			}
			n := int(v)
			total, lo, hi = total+n, min(lo, n), max(hi, n)
		}
		even := cluster.NumShards / len(servers)
		return total == cluster.NumShards && lo >= even-1 && hi <= even+2
	})
}

// logLines keeps a server's log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

// tail is the last n lines.
func (l *logLines) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-n):], "\n")
}
