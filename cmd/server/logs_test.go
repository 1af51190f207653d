package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-go/trellis/trellistest"
)

// TestLogsStayJSONWhileRedisIsDown runs the binary on a Redis that then
// stops, and keeps calling it: every line on stderr, the Redis client's
// complaints included, is a JSON object.
func TestLogsStayJSONWhileRedisIsDown(t *testing.T) {
	bin := buildServer(t)
	rs := trellistest.StartRedisServer(t)
	cmd := exec.Command(bin)
	cmd.Env = cleanEnv("TRELLIS_HTTP_ADDR=127.0.0.1:0", "TRELLIS_REDIS_URL="+rs.URL(), "TRELLIS_REDIS_PREFIX=logs", "TRELLIS_CLUSTER_ADDR=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		lines []string
	)
	listening := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				listening <- rec.Addr
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-read; _ = cmd.Wait() })
	addr := trellistest.Recv(t, listening, 30*time.Second)

	rs.Stop()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	// Readiness probes and requests, as while an outage lasts: each makes
	// the Redis client dial, fail and say so.
	redisLines := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(strings.ToLower(l), "redis") && strings.Contains(l, "dial") {
				n++
			}
		}
		return n
	}
	trellistest.Eventually(t, 20*time.Second, "the Redis client to log a failed dial", func() bool {
		for _, path := range []string{"/readyz", "/counters/logs"} {
			if resp, err := client.Get("http://" + addr + path); err == nil {
				_ = resp.Body.Close()
			}
		}
		return redisLines() > 0
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-read
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Errorf("a stderr line is not JSON (%v): %s", err, l)
		}
	}
}
