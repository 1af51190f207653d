package runtime_test

import (
	"context"
	"io"
	"log/slog"
	goruntime "runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
	trt "github.com/trellis-go/trellis/runtime"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// system a test starts must be shut down.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait in these tests; nothing waits on a bare sleep.
const waitLimit = 5 * time.Second

// newSystem starts a system that the test shuts down when it ends, logging
// to the test's output only on failure-worthy levels. It has at least two
// workers whatever GOMAXPROCS is (opts may set another number): several
// tests hold one worker in a blocked handler while another goes on.
func newSystem(t testing.TB, opts ...trt.Option) *trt.System {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	base := []trt.Option{trt.WithLogger(log), trt.WithWorkers(max(2, goruntime.GOMAXPROCS(0)))}
	sys := trt.NewSystem(t.Name(), append(base, opts...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return sys
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// probe is an actor that hands every message it gets to the test.
type probe[T any] = testenv.Probe[T]

// newProbe spawns a probe whose Expect waits at most waitLimit.
func newProbe[T any](t testing.TB, sys *trt.System, name string) *probe[T] {
	t.Helper()
	return testenv.NewProbe[T](t, sys, name, waitLimit)
}

// recv takes one value from ch or fails after waitLimit.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	return testenv.Recv(t, ch, waitLimit)
}

// eventually polls cond until it holds or waitLimit passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, waitLimit, what, cond)
}
