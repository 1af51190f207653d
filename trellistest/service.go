// Package trellistest is the test kit of Trellis applications: the whole
// service in-process on a free loopback port with a fake clock (Start),
// HTTP helpers that read responses in full and check problems, bounded
// waits (Recv, Eventually), a clock step that waits until the timers due
// by then have run (Service.AdvanceTimers), the Redis of the tests
// (RedisURL, Redis), clusters of instances (StartInstances) whose
// instances a test can kill or partition (Service.Kill,
// Service.Partition), and workflows run to a status (WaitWorkflow), one
// step at a time (WithSteppedWorkflows, StepWorkflow) or crashed at each
// of their crash points (CrashWorkflows). It imports package testing, so
// that only tests link it: a server binary built on package trellis does
// not.
package trellistest

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/faulthook"
	"github.com/trellis-go/trellis/internal/testkit/faults"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// Service is a whole service running in-process for a test, on a free
// loopback port, with a fake clock: advance Clock instead of sleeping.
type Service struct {
	*trellis.Service
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

	logs   *testenv.LogBuffer
	faults *faults.Points // what Kill, Partition and Heal act on
	steps  *stepper       // the held workflow steps (WithSteppedWorkflows); nil: none
}

// Option configures Start.
type Option func(*options)

type options struct {
	redisURL  string
	prefix    string
	logger    *slog.Logger
	configure []func(*trellis.Config)
	service   []trellis.Option
	crash     func(faulthook.WorkflowPoint) bool // where the workflows crash (CrashWorkflows)
	stepped   bool                               // the workflows' steps are held (WithSteppedWorkflows)
	clockAt   time.Time                          // where the fake clock starts (zero: now, to the millisecond)
}

// WithRedisURL runs the service on the Redis at url (see RedisURL)
// instead of the embedded store. Unless WithStorePrefix is given too, the
// keys get a prefix of their own, removed at the end.
func WithRedisURL(url string) Option { return func(o *options) { o.redisURL = url } }

// WithStorePrefix sets the Redis key prefix, so that two test services can
// share their entities' state. The keys are left in place at the end.
func WithStorePrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithConfig lets the test change the configuration (after the test kit's
// own settings: loopback addresses, debug logging, the store).
func WithConfig(f func(*trellis.Config)) Option {
	return func(o *options) { o.configure = append(o.configure, f) }
}

// WithServiceOptions passes options to trellis.New, such as
// trellis.WithContract. The test kit sets the logger and the clock itself.
func WithServiceOptions(opts ...trellis.Option) Option {
	return func(o *options) { o.service = append(o.service, opts...) }
}

// WithLogger sends the service's log to l. By default it is kept in
// memory (Logs) and printed only when the test fails.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Start boots the service with setup on 127.0.0.1:0 (with Redis, its
// cluster port too: a cluster of one) and stops it
// gracefully when the test ends (t.Cleanup). It fails the test if the
// service does not start or does not stop cleanly.
func Start(t testing.TB, setup trellis.Setup, opts ...Option) *Service {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg := trellis.DefaultConfig()
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
	if (cfg.RedisURL != "" || cfg.RedisClusterURL != "") && (cfg.ClusterAddr == "" || cfg.ClusterAddr == trellis.DefaultClusterAddr) {
		// A cluster of one (or more: StartInstances), on a free port:
		// tests run in parallel.
		cfg.ClusterAddr = "127.0.0.1:0"
	}

	// The durable timers keep times in whole milliseconds, rounding due
	// times up and "now" down: from a whole millisecond, moving the clock
	// by exactly a timer's delay makes it due. Today rather than a fixed
	// epoch, so that the times the service stores and reports (timer
	// records, the admin API) sit next to the real ones in a shared Redis
	// and in the logs, whose own timestamps are real.
	clockAt := o.clockAt
	if clockAt.IsZero() {
		clockAt = time.Now().Truncate(time.Millisecond)
	}
	ts := &Service{Clock: clockwork.NewFakeClockAt(clockAt), logs: &testenv.LogBuffer{},
		faults: faults.New()}
	ts.faults.CrashWorkflowsAt(o.crash)
	if o.stepped {
		ts.steps = &stepper{}
		ts.faults.HoldWorkflowSteps(ts.steps)
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.NewJSONHandler(ts.logs, &slog.HandlerOptions{Level: cfg.LogLevel}))
	}
	svc, err := trellis.New(cfg, setup, append(o.service, trellis.WithLogger(logger), trellis.WithClock(ts.Clock),
		withFaults(ts.faults))...)
	if err != nil {
		t.Fatalf("start the test service: %v", err)
	}
	if err := svc.Start(context.Background()); err != nil {
		_ = svc.Shutdown(context.Background())
		t.Fatalf("start the test service: %v", err)
	}

	ts.Service = svc
	ts.URL = "http://" + svc.Addr().String()
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
	t.Cleanup(ts.Heal) // runs first: a partitioned instance stops as a connected one
	return ts
}

// maxLogDump is how much of the log's end a failed test prints.
const maxLogDump = 64 << 10

// Logs is what the service logged so far (JSON lines), unless
// WithLogger sent it elsewhere.
func (ts *Service) Logs() string { return ts.logs.String() }

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
