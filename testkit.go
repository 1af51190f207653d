package trellis

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
)

// TestService is a whole service running in-process for a test, on a free
// loopback port, with a fake clock: advance Clock instead of sleeping.
type TestService struct {
	*Service
	// URL is the base URL, http://127.0.0.1:PORT.
	URL string
	// Clock drives the actor system's timers and passivation. It starts at
	// a whole millisecond, so advancing it by exactly a timer's delay (in
	// whole milliseconds) makes the timer due.
	Clock *clockwork.FakeClock
	// Client is the component client, to call components without HTTP.
	Client *components.Client
	// HTTP is a keep-alive client for the service.
	HTTP *http.Client

	logs *lockedBuffer
}

// TestOption configures StartTest.
type TestOption func(*testOptions)

type testOptions struct {
	redisURL  string
	prefix    string
	logger    *slog.Logger
	configure []func(*Config)
}

// WithRedisURL runs the service on the Redis at url (from
// testenv.RedisURL) instead of the embedded store. Unless WithStorePrefix
// is given too, the keys get a prefix of their own, removed at the end.
func WithRedisURL(url string) TestOption { return func(o *testOptions) { o.redisURL = url } }

// WithStorePrefix sets the Redis key prefix, so that two test services can
// share their entities' state. The keys are left in place at the end.
func WithStorePrefix(prefix string) TestOption { return func(o *testOptions) { o.prefix = prefix } }

// WithConfig lets the test change the configuration (after the test kit's
// own settings: loopback address, debug logging, the store).
func WithConfig(f func(*Config)) TestOption {
	return func(o *testOptions) { o.configure = append(o.configure, f) }
}

// WithTestLogger sends the service's log to l. By default it is kept in
// memory (Logs) and printed only when the test fails.
func WithTestLogger(l *slog.Logger) TestOption { return func(o *testOptions) { o.logger = l } }

// StartTest boots the service with setup on 127.0.0.1:0 and stops it
// gracefully when the test ends (t.Cleanup). It fails the test if the
// service does not start or does not stop cleanly.
func StartTest(t testing.TB, setup Setup, opts ...TestOption) *TestService {
	t.Helper()
	var o testOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg := DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.LogLevel = slog.LevelDebug
	cfg.RedisURL = o.redisURL
	ownPrefix := o.prefix == "" && o.redisURL != ""
	if o.prefix != "" {
		cfg.RedisPrefix = o.prefix
	} else if ownPrefix {
		cfg.RedisPrefix = "trellis-test-" + rand.Text()
	}
	for _, f := range o.configure {
		f(&cfg)
	}

	// The durable timers keep times in whole milliseconds, rounding due
	// times up and "now" down: from a whole millisecond, moving the clock
	// by exactly a timer's delay makes it due. Today rather than a fixed
	// epoch, so that the times the service stores and reports (timer
	// records, the admin API) sit next to the real ones in a shared Redis
	// and in the logs, whose own timestamps are real.
	ts := &TestService{Clock: clockwork.NewFakeClockAt(time.Now().Truncate(time.Millisecond)), logs: &lockedBuffer{}}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.NewJSONHandler(ts.logs, &slog.HandlerOptions{Level: cfg.LogLevel}))
	}
	svc, err := New(cfg, setup, WithLogger(logger), WithClock(ts.Clock))
	if err != nil {
		t.Fatalf("start the test service: %v", err)
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		_ = svc.Shutdown(context.Background())
		t.Fatalf("start the test service: listen: %v", err)
	}
	svc.setListener(ln) // so that Addr answers at once
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ln) }()

	ts.Service = svc
	ts.URL = "http://" + ln.Addr().String()
	ts.Client = svc.Host().Client
	transport := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	ts.HTTP = &http.Client{Transport: transport, Timeout: 30 * time.Second}

	t.Cleanup(func() {
		transport.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			t.Errorf("stop the test service: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("test service: %v", err)
		}
		if ownPrefix {
			if err := deleteKeys(ctx, cfg.RedisURL, cfg.RedisPrefix); err != nil {
				t.Errorf("remove the test's Redis keys: %v", err)
			}
		}
		if t.Failed() && o.logger == nil {
			logs := ts.Logs()
			if len(logs) > maxLogDump {
				logs = "…\n" + logs[len(logs)-maxLogDump:]
			}
			t.Logf("service log:\n%s", logs)
		}
	})
	return ts
}

// maxLogDump is how much of the log's end a failed test prints.
const maxLogDump = 64 << 10

// Logs is what the service logged so far (JSON lines), unless
// WithTestLogger sent it elsewhere.
func (ts *TestService) Logs() string { return ts.logs.String() }

// deleteKeys removes the keys under a test's own prefix.
func deleteKeys(ctx context.Context, url, prefix string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	c := redis.NewClient(opts)
	defer c.Close()
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	return c.Del(ctx, keys...).Err()
}

// Response is a test request's response, read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Call sends a request and reads the response. body is sent as is when it
// is a string or []byte (with Content-Type application/json), as JSON
// otherwise, and not at all when nil. Unlike the t helpers it may be used
// from any goroutine.
func (ts *TestService) Call(ctx context.Context, method, path string, body any) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode the body: %w", method, path, err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	return ts.Send(req)
}

// Send sends req (its URL must point at ts.URL) and reads the response.
func (ts *TestService) Send(req *http.Request) (*Response, error) {
	resp, err := ts.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the response: %w", req.Method, req.URL.Path, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Do is Call for the test goroutine: it fails the test on a transport error.
func (ts *TestService) Do(t testing.TB, method, path string, body any) *Response {
	t.Helper()
	resp, err := ts.Call(context.Background(), method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Get is Do with GET.
func (ts *TestService) Get(t testing.TB, path string) *Response {
	t.Helper()
	return ts.Do(t, http.MethodGet, path, nil)
}

// Post is Do with POST.
func (ts *TestService) Post(t testing.TB, path string, body any) *Response {
	t.Helper()
	return ts.Do(t, http.MethodPost, path, body)
}

// Delete is Do with DELETE.
func (ts *TestService) Delete(t testing.TB, path string) *Response {
	t.Helper()
	return ts.Do(t, http.MethodDelete, path, nil)
}

// JSON decodes the body into v, failing the test if it is not JSON.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response body %q: %v", r.Body, err)
	}
}

// Problem checks that the response is a problem (application/problem+json
// with the response's status) and returns it.
func (r *Response) Problem(t testing.TB) api.Problem {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != api.ContentTypeProblem {
		t.Fatalf("Content-Type = %q, want %q (status %d, body %s)", ct, api.ContentTypeProblem, r.Status, r.Body)
	}
	var p api.Problem
	r.JSON(t, &p)
	if p.Status != r.Status {
		t.Fatalf("problem status %d, response status %d", p.Status, r.Status)
	}
	return p
}

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
