package deliverytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
	"go.uber.org/goleak"
)

// WaitLimit bounds every wait in these tests; nothing waits on a bare sleep.
const WaitLimit = 10 * time.Second

// NewSystem starts a system that is shut down when the test ends. Its log
// goes to the test's output when the test is verbose, and is kept in the
// returned buffer, with the errors it logs, for tests that look for one.
func NewSystem(t testing.TB, opts ...runtime.Option) (*runtime.System, *LogBuffer) {
	t.Helper()
	logs := &LogBuffer{}
	var w io.Writer = logs
	level := slog.LevelInfo
	if testing.Verbose() {
		w, level = io.MultiWriter(logs, tWriter{t}), slog.LevelDebug
	}
	log := slog.New(keepErrors{Handler: slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}), logs: logs})
	sys := runtime.NewSystem(t.Name(), append([]runtime.Option{runtime.WithLogger(log)}, opts...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return sys, logs
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// LogBuffer collects log lines and the errors logged, safe for concurrent
// use.
type LogBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	errs []error
}

// LoggedError returns the first error logged that wraps target, or nil.
func (b *LogBuffer) LoggedError(target error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, err := range b.errs {
		if errors.Is(err, target) {
			return err
		}
	}
	return nil
}

// keepErrors is a log handler that keeps in logs the error of each record
// that has one (the attribute "err", as the controllers log it), so that
// a test can match it with errors.Is, then hands the record on.
type keepErrors struct {
	slog.Handler
	logs *LogBuffer
}

func (h keepErrors) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			h.logs.mu.Lock()
			h.logs.errs = append(h.logs.errs, err)
			h.logs.mu.Unlock()
		}
		return true
	})
	return h.Handler.Handle(ctx, r)
}

func (h keepErrors) WithAttrs(attrs []slog.Attr) slog.Handler {
	return keepErrors{Handler: h.Handler.WithAttrs(attrs), logs: h.logs}
}

func (h keepErrors) WithGroup(name string) slog.Handler {
	return keepErrors{Handler: h.Handler.WithGroup(name), logs: h.logs}
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Contains reports whether s was logged.
func (b *LogBuffer) Contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Contains(b.buf.Bytes(), []byte(s))
}

// Probe is an actor that hands every message it gets to the test.
type Probe[T any] = testenv.Probe[T]

// NewProbe spawns a probe whose Expect waits at most waitLimit.
func NewProbe[T any](t testing.TB, sys *runtime.System, name string) *Probe[T] {
	t.Helper()
	return testenv.NewProbe[T](t, sys, name, WaitLimit)
}

// Recv takes one value from ch or fails after waitLimit.
func Recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	return testenv.Recv(t, ch, WaitLimit)
}

// Eventually polls cond until it holds or waitLimit passes.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, WaitLimit, what, cond)
}

// Watcher reports the end of the actors it is told to watch.
type Watcher struct {
	ref     runtime.Ref[runtime.AnyRef]
	Stopped chan string // the path of each watched actor that stopped
}

// NewWatcher spawns a watcher on sys.
func NewWatcher(t testing.TB, sys *runtime.System) *Watcher {
	t.Helper()
	w := &Watcher{Stopped: make(chan string, 16)}
	ref, err := runtime.Spawn(sys, "watcher", func() runtime.Behavior[runtime.AnyRef] {
		return runtime.Funcs[runtime.AnyRef]{
			Message: func(ctx *runtime.Context[runtime.AnyRef], r runtime.AnyRef) { ctx.Watch(r) },
			Signal: func(_ *runtime.Context[runtime.AnyRef], s runtime.Signal) {
				if term, ok := s.(runtime.Terminated); ok {
					w.Stopped <- term.Ref.Path()
				}
			},
		}
	})
	if err != nil {
		t.Fatalf("spawn watcher: %v", err)
	}
	w.ref = ref
	return w
}

// Watch starts watching ref.
func (w *Watcher) Watch(ref runtime.AnyRef) { w.ref.Tell(ref) }

// ExpectStopped waits until the watched actor at path stops.
func (w *Watcher) ExpectStopped(t testing.TB, path string) {
	t.Helper()
	if got := Recv(t, w.Stopped); got != path {
		t.Fatalf("stopped: %s, want %s", got, path)
	}
}

// Errors lists the first n errors logged (with how many there were in
// all): what a run that failed went through, which the tail of the log
// may no longer show.
func (b *LogBuffer) Errors(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out strings.Builder
	fmt.Fprintf(&out, "%d errors logged", len(b.errs))
	for _, err := range b.errs[:min(n, len(b.errs))] {
		out.WriteString("\n\t\t" + err.Error())
	}
	return out.String()
}

// Tail returns the last n lines logged.
func (b *LogBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := bytes.Split(bytes.TrimRight(b.buf.Bytes(), "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}

// Main is the TestMain of the delivery packages: it fails the package if a
// test leaves a goroutine behind, and stops the Redis servers the tests
// started for themselves (testenv.Servers). Run with the environment
// variable of the kill -9 tests, the binary is instead those tests'
// producer process.
func Main(m *testing.M) {
	if os.Getenv(Kill9RoleEnv) != "" {
		os.Exit(Kill9Child())
	}
	goleak.VerifyTestMain(testenv.Servers(m))
}
