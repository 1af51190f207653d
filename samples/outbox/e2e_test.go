package outbox_test

// The outbox on the real binary (./cmd/outbox), as processes on a real
// Redis, mailing through a mail gateway the test runs.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/samples/outbox"
	"github.com/trellis-go/trellis/trellistest"
)

// gatewayRecorder is the mail gateway: it counts the notices mailed per
// hold, and answers 503 while it is down.
type gatewayRecorder struct {
	mu     sync.Mutex
	mailed map[string]int
	down   bool
}

func (g *gatewayRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var n outbox.Notice
	if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	g.mailed[n.Hold]++
}

func (g *gatewayRecorder) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

// counts returns how many holds were mailed, and those mailed twice or more.
func (g *gatewayRecorder) counts() (holds int, twice []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for hold, n := range g.mailed {
		if n > 1 {
			twice = append(twice, hold)
		}
	}
	return len(g.mailed), twice
}

// outboxProc is one process of the outbox binary.
type outboxProc struct {
	cmd         *exec.Cmd
	base        string // its HTTP address, as http://host:port
	clusterAddr string
	exited      chan struct{}
}

var (
	listeningRe = regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`)
	joinedRe    = regexp.MustCompile(`"msg":"joined the cluster".*?"addr":"([^"]+)"`)
)

// startOutbox starts the binary with env and waits until it listens.
func startOutbox(t *testing.T, bin string, env []string) *outboxProc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &outboxProc{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			if m := joinedRe.FindStringSubmatch(line); m != nil {
				p.clusterAddr = m[1]
			}
			if m := listeningRe.FindStringSubmatch(line); m != nil && p.base == "" {
				p.base = "http://" + m[1]
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill9(t) })
	select {
	case <-ready:
	case <-p.exited:
		t.Fatal("the outbox process exited before it listened")
	case <-time.After(30 * time.Second):
		t.Fatal("the outbox process did not listen within 30 s")
	}
	return p
}

// kill9 kills the process (SIGKILL) and waits for it.
func (p *outboxProc) kill9(t *testing.T) {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Error("the outbox process did not exit 10 s after SIGKILL")
	}
}

// stop stops the process gracefully (SIGTERM) and waits for it.
func (p *outboxProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the outbox process did not stop within 30 s of SIGTERM")
	}
}

// TestE2EOutboxTwoBinaries: the outbox binary, two processes as one
// cluster on real Redis, mailing through the test's gateway. Changes go
// through both and each notice is mailed once; after a SIGTERM of the
// queue's owner, the other takes over and nothing is mailed twice; with
// the gateway down, ten more changes are stored, unmailed, and the owner
// is killed (SIGKILL): the third process takes the queue over once the
// dead one's lease lapses and mails them, and the changes it accepted
// meanwhile. Every accepted change is mailed; repeats are counted and held
// to the flow-control window.
func TestE2EOutboxTwoBinaries(t *testing.T) {
	trellistest.Long(t)
	const perPhase, window = 10, 50
	bin := filepath.Join(t.TempDir(), "outbox")
	build := exec.Command("go", "build", "-o", bin, "github.com/trellis-go/trellis/samples/outbox/cmd/outbox")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./samples/outbox/cmd/outbox: %v\n%s", err, out)
	}
	gw := &gatewayRecorder{mailed: make(map[string]int)}
	gateway := httptest.NewServer(gw)
	t.Cleanup(gateway.Close)

	redisURL := trellistest.RedisURL(t)
	prefix := "outbox-e2e-" + rand.Text()[:10]
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if keys, err := rdb.Keys(ctx, prefix+":*").Result(); err == nil && len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
		_ = rdb.Close()
	})
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	env := []string{"OUTBOX_MAIL_URL=" + gateway.URL, "TRELLIS_REDIS_URL=" + redisURL, "TRELLIS_REDIS_PREFIX=" + prefix,
		"TRELLIS_HTTP_ADDR=127.0.0.1:0", "TRELLIS_CLUSTER_ADDR=127.0.0.1:0", "TRELLIS_CLUSTER_SECRET=" + hex.EncodeToString(secret),
		"TRELLIS_CLUSTER_LEASE=2s"}
	a, b := startOutbox(t, bin, env), startOutbox(t, bin, env)

	client := &http.Client{Timeout: time.Minute}
	t.Cleanup(client.CloseIdleConnections)
	sent := 0
	accept := func(through ...*outboxProc) {
		t.Helper()
		for i := range perPhase {
			url := fmt.Sprintf("%s/holds/h%d/state/expired", through[i%len(through)].base, sent)
			req, _ := http.NewRequest(http.MethodPut, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("PUT %s: %v", url, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("PUT %s: %d %s", url, resp.StatusCode, body)
			}
			sent++
		}
	}
	phase := func(name string, through ...*outboxProc) {
		t.Helper()
		accept(through...)
		trellistest.Eventually(t, time.Minute, name+": every notice mailed", func() bool {
			holds, _ := gw.counts()
			return holds == sent
		})
	}
	ownerOf := func(procs ...*outboxProc) (own, other *outboxProc) {
		t.Helper()
		holder, err := rdb.HGet(t.Context(), prefix+":queue:{notices}:meta", "holder").Result()
		if err != nil {
			t.Fatalf("the queue's holder: %v", err)
		}
		for i, p := range procs {
			if p.clusterAddr != "" && strings.HasSuffix(holder, " "+p.clusterAddr) {
				return p, procs[1-i]
			}
		}
		t.Fatalf("the queue's holder %q is none of the processes", holder)
		return nil, nil
	}

	phase("through both processes", a, b)
	own, survivor := ownerOf(a, b)
	own.stop(t)
	phase("after the owner's SIGTERM", survivor)
	if _, twice := gw.counts(); len(twice) > 0 {
		t.Fatalf("mailed twice without a crash: %v", twice)
	}

	c := startOutbox(t, bin, env)
	phase("through the survivor and a new process", survivor, c)
	gw.setDown(true)
	accept(survivor, c) // stored, not mailed
	survivor.kill9(t)
	gw.setDown(false)
	phase("after the owner's SIGKILL", c)
	_, twice := gw.counts()
	if len(twice) > window {
		t.Fatalf("%d notices mailed twice after a SIGKILL, more than the window of %d", len(twice), window)
	}
	t.Logf("%d notices accepted and mailed; %d mailed again after the SIGKILL (at most %d allowed)", sent, len(twice), window)
}
