package testenv

import (
	goruntime "runtime"
	"sync/atomic"
	"syscall"
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

// LineRoundTrip returns how long one cache line takes to go from one
// processor to another and back: two goroutines hand a counter to each
// other through two atomics on lines of their own, n times, busy-waiting.
// It is the machine's price for every hand-over between processors, the
// yardstick that explains why ratios to raw tell differ between machines
// (raw tell hands its messages over in batches; a request/response loop
// hands each one over). It returns 0 when GOMAXPROCS is 1.
func LineRoundTrip(n int) time.Duration {
	if goruntime.GOMAXPROCS(0) < 2 {
		return 0
	}
	var lines [2]struct {
		v atomic.Int64
		_ [56]byte
	}
	wait := func(a *atomic.Int64, want int64) {
		for spins := 0; a.Load() != want; spins++ {
			if spins%4096 == 4095 {
				goruntime.Gosched() // the other goroutine may be descheduled
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(1); i <= int64(n); i++ {
			wait(&lines[0].v, i)
			lines[1].v.Store(i)
		}
	}()
	start := time.Now()
	for i := int64(1); i <= int64(n); i++ {
		lines[0].v.Store(i)
		wait(&lines[1].v, i)
	}
	d := time.Since(start)
	<-done
	return d / time.Duration(n)
}

// ProcessCPU is the CPU time (user and system) this process has used so
// far: what a benchmark spent, steadier under load from elsewhere on the
// machine than a rate.
func ProcessCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
