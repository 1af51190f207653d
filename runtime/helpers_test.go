package runtime_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/internal/testenv"
	trt "github.com/trellis-go/trellis/runtime"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// system a test starts must be shut down.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait in these tests; nothing waits on a bare sleep.
const waitLimit = 5 * time.Second

// newSystem starts a system that the test shuts down when it ends, logging
// to the test's output only on failure-worthy levels.
func newSystem(t testing.TB, opts ...trt.Option) *trt.System {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	sys := trt.NewSystem(t.Name(), append([]trt.Option{trt.WithLogger(log)}, opts...)...)
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

// probe is an actor that forwards every message and signal it gets to a
// channel the test reads.
type probe[T any] struct {
	Ref     trt.Ref[T]
	msgs    chan T
	signals chan trt.Signal
}

func newProbe[T any](t testing.TB, sys *trt.System, name string) *probe[T] {
	t.Helper()
	p := &probe[T]{msgs: make(chan T, 1024), signals: make(chan trt.Signal, 64)}
	ref, err := trt.Spawn(sys, name, func() trt.Behavior[T] {
		return trt.Funcs[T]{
			Message: func(_ *trt.Context[T], m T) { p.msgs <- m },
			Signal:  func(_ *trt.Context[T], s trt.Signal) { p.signals <- s },
		}
	})
	if err != nil {
		t.Fatalf("spawn probe: %v", err)
	}
	p.Ref = ref
	return p
}

// expect returns the next message, failing the test if none comes in time.
func (p *probe[T]) expect(t testing.TB) T {
	t.Helper()
	return recv(t, p.msgs)
}

// expectNone fails if a message arrives within d; use it only after
// something that would have produced the message has certainly happened.
func (p *probe[T]) expectNone(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case m := <-p.msgs:
		t.Fatalf("unexpected message %v", m)
	case <-time.After(d):
	}
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
