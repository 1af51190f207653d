package testenv

import (
	"testing"
	"time"

	"github.com/trellis-go/trellis/runtime"
)

// TellN spawns an actor on sys, tells it n ints from the calling goroutine
// and returns how long until the actor has handled the last: the runtime's
// raw tell throughput, the yardstick the runtime's and delivery's
// benchmarks compare themselves with. The actor is stopped afterwards.
func TellN(tb testing.TB, sys *runtime.System, n int) time.Duration {
	tb.Helper()
	done := make(chan struct{})
	ref, err := runtime.Spawn(sys, "", func() runtime.Behavior[int] {
		count := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[int], _ int) {
			if count++; count == n {
				close(done)
			}
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	for i := range n {
		ref.Tell(i)
	}
	<-done
	d := time.Since(start)
	sys.Stop(ref)
	return d
}
