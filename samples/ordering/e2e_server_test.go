package ordering_test

// The machinery of the end-to-end tests: the real server binary, built once
// per package run, started as a process on a Redis database of its own,
// and spoken to over real HTTP.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

// binDir holds the server binary for the package run; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trellis-ordering-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	binDir = dir
	code := trellistest.Servers(m).Run()
	_ = os.RemoveAll(dir)
	// Every server process and HTTP connection of a test is gone by its
	// end; a goroutine left over is a leak in the tests or the sample.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	serverBin string
	buildErr  error
)

// serverBinary builds ./cmd/server once per package run and returns its
// path. Building the command, not linking the sample into the test, is the
// point: the tests run exactly what is deployed.
func serverBinary(t *testing.T) string {
	t.Helper()
	trellistest.Long(t)
	buildOnce.Do(func() {
		bin := filepath.Join(binDir, "trellis-server")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/trellis-go/trellis/cmd/server")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Dockerfile builds it
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/server: %w\n%s", err, out)
			return
		}
		serverBin = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return serverBin
}

// redisDBs are the Redis databases the tests take turns on: one per test,
// so that each test's orders and timers are its own while the server keeps
// its default key prefix. Database 0 is left to the other packages' tests,
// which share it under prefixes of their own.
var redisDBs = func() chan int {
	ch := make(chan int, 15)
	for db := 1; db <= 15; db++ {
		ch <- db
	}
	return ch
}()

// defaultPrefix is the key prefix of a server started without
// TRELLIS_REDIS_PREFIX.
const defaultPrefix = "trellis"

// redisDB takes a Redis database of the test Redis (TRELLIS_TEST_REDIS_URL)
// for the test, clears the server's keys from it before and after, and
// returns its URL. The server's keys are those under the default prefix
// and under the other prefixes given; only they are removed, so a
// database of a Redis of one's own keeps anything else it holds.
func redisDB(t *testing.T, otherPrefixes ...string) string {
	t.Helper()
	prefixes := append([]string{defaultPrefix}, otherPrefixes...)
	base := trellistest.RedisURL(t)
	var db int
	select {
	case db = <-redisDBs:
	case <-time.After(time.Minute):
		t.Fatal("no free Redis database within a minute (15 are shared by the e2e tests)")
	}
	u, err := url.Parse(base)
	if err != nil {
		redisDBs <- db
		t.Fatalf("%s: %v", trellistest.RedisURLEnv, err)
	}
	u.Path = "/" + strconv.Itoa(db)
	dbURL := u.String()
	opts, err := redis.ParseURL(dbURL)
	if err != nil {
		redisDBs <- db
		t.Fatalf("%s with database %d: %v", trellistest.RedisURLEnv, db, err)
	}
	client := redis.NewClient(opts)
	if err := clearKeys(client, prefixes); err != nil {
		_ = client.Close()
		redisDBs <- db
		t.Fatalf("clear Redis database %d: %v", db, err)
	}
	t.Cleanup(func() {
		defer func() { redisDBs <- db }()
		defer client.Close()
		if err := clearKeys(client, prefixes); err != nil {
			t.Errorf("clear Redis database %d: %v", db, err)
		}
	})
	return dbURL
}

// clearKeys deletes the keys under each of prefixes.
func clearKeys(c *redis.Client, prefixes []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range prefixes {
		keys, err := keysUnder(ctx, c, p)
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// keysUnder lists the keys a server with prefix writes: <prefix>:*. The
// prefixes the tests use have no glob characters (the server refuses
// them), so the pattern matches nothing else.
func keysUnder(ctx context.Context, c *redis.Client, prefix string) ([]string, error) {
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

// keysAt lists the keys under prefix (see keysUnder) in the Redis database
// at url, failing the test if it cannot.
func keysAt(t *testing.T, url, prefix string) []string {
	t.Helper()
	keys, _ := scanAt(t, url, prefix, false)
	return keys
}

// documentsAt is keysAt for entity keys, leaving out the tombstones a
// delete leaves (a hash with only the last revision, so that a re-created
// entity never gets a revision again): the documents that still exist.
func documentsAt(t *testing.T, url, prefix string) []string {
	t.Helper()
	_, docs := scanAt(t, url, prefix, true)
	return docs
}

// scanAt lists the keys under prefix and, when docs is set, those of them
// that hold an entity document.
func scanAt(t *testing.T, url, prefix string, docs bool) (keys, documents []string) {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err = keysUnder(ctx, rdb, prefix)
	if err != nil {
		t.Fatalf("SCAN %s:*: %v", prefix, err)
	}
	if !docs {
		return keys, nil
	}
	for _, k := range keys {
		has, err := rdb.HExists(ctx, k, "data").Result()
		if err != nil {
			t.Fatalf("HEXISTS %s data: %v", k, err)
		}
		if has {
			documents = append(documents, k)
		}
	}
	return keys, documents
}

// serverConfig is how a test server is started.
type serverConfig struct {
	redisURL   string        // the test's database, from redisDB
	expiry     time.Duration // TRELLIS_ORDER_EXPIRY
	adminToken string        // TRELLIS_ADMIN_TOKEN
	prefix     string        // TRELLIS_REDIS_PREFIX ("": unset, the default); give it to redisDB too
	clusterURL string        // TRELLIS_REDIS_CLUSTER_URL, instead of redisURL when set
	// The instances on one Redis and prefix are one cluster, each with
	// its cluster port on a free loopback port; they sign with secret
	// (TRELLIS_CLUSTER_SECRET; "": the one kept in Redis), and lease is
	// TRELLIS_CLUSTER_LEASE (0: the default).
	secret string
	lease  time.Duration
}

// newServerConfig is a configuration on a database of the test's own, with
// a fresh admin token.
func newServerConfig(t *testing.T, expiry time.Duration) serverConfig {
	return serverConfig{redisURL: redisDB(t), expiry: expiry, adminToken: "e2e-admin-" + rand.Text()}
}

// server is one running server process.
type server struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	logs *lockedLog

	exited  chan struct{} // closed once the process was waited for
	waitErr error         // what Wait returned, once exited is closed
}

// startServer starts the binary with cfg on a free loopback port, waits
// until it listens and is ready (its timers run), and stops it when the
// test ends: SIGTERM, and a clean exit is expected within 20 s. Its log is
// printed if the test fails.
func startServer(t *testing.T, cfg serverConfig) *server {
	t.Helper()
	bin := serverBinary(t)
	cmd := exec.Command(bin)
	env := []string{
		"TRELLIS_HTTP_ADDR=127.0.0.1:0",
		"TRELLIS_LOG_LEVEL=info",
		"TRELLIS_ORDER_EXPIRY=" + cfg.expiry.String(),
		"TRELLIS_ADMIN_TOKEN=" + cfg.adminToken,
	}
	if cfg.clusterURL != "" {
		env = append(env, "TRELLIS_REDIS_CLUSTER_URL="+cfg.clusterURL)
	} else {
		env = append(env, "TRELLIS_REDIS_URL="+cfg.redisURL)
	}
	if cfg.prefix != "" {
		env = append(env, "TRELLIS_REDIS_PREFIX="+cfg.prefix)
	}
	// Each instance is a member of the cluster of those on its Redis and
	// prefix (as by default), with its cluster port on a free loopback port.
	env = append(env, "TRELLIS_CLUSTER_ADDR=127.0.0.1:0")
	if cfg.secret != "" {
		env = append(env, "TRELLIS_CLUSTER_SECRET="+cfg.secret)
	}
	if cfg.lease > 0 {
		env = append(env, "TRELLIS_CLUSTER_LEASE="+cfg.lease.String())
	}
	cmd.Env = serverEnv(env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, logs: &lockedLog{}, exited: make(chan struct{})}
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
			t.Logf("log of the server %s:\n%s", s.base, s.logs.tail(100))
		}
	})

	// The port comes from the "listening" log line, since the kernel chose it.
	select {
	case addr := <-listening:
		s.base = "http://" + addr
	case <-s.exited:
		t.Fatalf("the server exited before listening: %v\n%s", s.waitErr, s.logs.tail(50))
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not listen within 30 s:\n%s", s.logs.tail(50))
	}
	// Ready means the store answers and the timer scheduler runs.
	c := newClient(t, "")
	eventually(t, 30*time.Second, "the server is ready", func() (bool, string) {
		r := c.try(http.MethodGet, s.base+"/readyz", "")
		return r != nil && r.status == http.StatusOK, fmt.Sprint(r)
	})
	return s
}

// serverEnv is the test's environment without any TRELLIS_ variable, plus
// extra.
func serverEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRELLIS_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// stop ends the process with SIGTERM, expecting a clean exit (code 0)
// within 20 s; it kills it if not. A process already gone is left alone.
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
	case <-time.After(20 * time.Second):
		s.t.Errorf("the server did not exit within 20 s of SIGTERM; killing it")
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// kill9 kills the process with SIGKILL, as a crash would: no shutdown, no
// timer handed back, no connection closed.
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

// lockedLog keeps a server's log lines.
type lockedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLog) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

// tail is the last n lines.
// all is every line so far.
func (l *lockedLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func (l *lockedLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// client speaks HTTP to the servers for one test, with the admin token when
// it has one.
type client struct {
	t     *testing.T
	http  *http.Client
	token string
}

// newClient makes a keep-alive client whose connections are closed when the
// test ends, and whose responses are validated against the contracts.
func newClient(t *testing.T, adminToken string) *client {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	// Every response is checked against the contracts: a status or a body
	// they do not describe fails the test.
	checked := trellistest.CheckContracts(t, tr, contract.Spec, api.Spec)
	return &client{t: t, http: &http.Client{Transport: checked, Timeout: 15 * time.Second}, token: adminToken}
}

// response is a response read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) String() string {
	if r == nil {
		return "no response"
	}
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

// try sends a request (a JSON body unless body is ""; the bearer token on
// /admin paths) and returns the response, or nil when there is none.
func (c *client) try(method, url, body string) *response {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		c.t.Errorf("%s %s: %v", method, url, err)
		return nil
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" && strings.Contains(url, "/admin/") {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}

// do is try that fails the test when there is no response. It may be used
// from any goroutine: it reports with Errorf and returns nil.
func (c *client) do(method, url, body string) *response {
	r := c.try(method, url, body)
	if r == nil {
		c.t.Errorf("%s %s: no response", method, url)
	}
	return r
}

// eventually polls cond every 50 ms until it holds, failing the test with
// what and cond's last detail if it does not within limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, limit, detail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
