package testenv

import (
	"testing"
	"time"

	"github.com/trellis-go/trellis/runtime"
)

// probeCapacity is how many messages a probe holds for the test: far more
// than a test sends it, so the probe never blocks its worker.
const probeCapacity = 4096

// Probe is an actor that hands every message it gets to the test, which
// takes them in the order they came with Expect. Give its Ref wherever an
// actor of protocol T is wanted.
type Probe[T any] struct {
	Ref   runtime.Ref[T]
	msgs  chan T
	limit time.Duration
}

// NewProbe spawns a probe on sys, named name (empty for a generated name);
// its Expect waits at most limit. It fails the test if the spawn fails.
func NewProbe[T any](t testing.TB, sys *runtime.System, name string, limit time.Duration) *Probe[T] {
	t.Helper()
	p := &Probe[T]{msgs: make(chan T, probeCapacity), limit: limit}
	ref, err := runtime.Spawn(sys, name, func() runtime.Behavior[T] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[T], m T) { p.msgs <- m })
	})
	if err != nil {
		t.Fatalf("spawn probe %q: %v", name, err)
	}
	p.Ref = ref
	return p
}

// Expect returns the next message, failing the test if none comes within
// the probe's limit.
func (p *Probe[T]) Expect(t testing.TB) T {
	t.Helper()
	return Recv(t, p.msgs, p.limit)
}

// ExpectNone fails the test if a message is waiting, or arrives within d
// (zero: only if one is waiting). Use it only after whatever would have
// sent the message has certainly happened.
func (p *Probe[T]) ExpectNone(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case m := <-p.msgs:
		t.Fatalf("unexpected message %#v", m)
	default:
	}
	if d <= 0 {
		return
	}
	select {
	case m := <-p.msgs:
		t.Fatalf("unexpected message %#v", m)
	case <-time.After(d):
	}
}

// Next returns the next message if one is waiting or arrives within d, and
// false if none does.
func (p *Probe[T]) Next(d time.Duration) (T, bool) {
	select {
	case m := <-p.msgs:
		return m, true
	case <-time.After(d):
		var zero T
		return zero, false
	}
}
