package runtime_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
	trt "github.com/trellis-go/trellis/runtime"
)

// Each benchmark runs a fixed workload on the runtime and the same workload
// on plain Go channels in the same process, and reports both and their
// ratio (runtime throughput / channel throughput: 1.0 is as fast as channels).

func report(b *testing.B, what string, n int, base, actor time.Duration) {
	b.Helper()
	perBase := float64(base.Nanoseconds()) / float64(n)
	perActor := float64(actor.Nanoseconds()) / float64(n)
	ratio := perBase / perActor
	b.ReportMetric(perActor, "ns/"+what)
	b.ReportMetric(perBase, "chan-ns/"+what)
	b.ReportMetric(ratio, "x-chan")
	b.Logf("%s: runtime %.1f ns, channel %.1f ns, ratio %.2fx (n=%d)", what, perActor, perBase, ratio, n)
}

func newBenchSystem(b *testing.B) *trt.System {
	sys := trt.NewSystem("bench")
	b.Cleanup(func() { _ = sys.Shutdown(context.Background()) })
	return sys
}

// BenchmarkTell: one sender tells 2,000,000 small messages to one actor;
// baseline: one goroutine sends them into a buffered channel read by another.
func BenchmarkTell(b *testing.B) {
	const n = 2_000_000
	sys := newBenchSystem(b)
	var base, actor time.Duration
	for b.Loop() {
		base += tellChannel(n)
		actor += testenv.TellN(b, sys, n)
	}
	report(b, "msg", n*b.N, base, actor)
}

func tellChannel(n int) time.Duration {
	ch := make(chan int, 1024)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		sum := 0
		for range n {
			sum += <-ch
		}
		_ = sum
		close(done)
	}()
	for i := range n {
		ch <- i
	}
	<-done
	return time.Since(start)
}

type ping struct {
	left  int
	reply trt.Ref[ping]
}

// BenchmarkPingPong: 500,000 round trips between two actors, the reply
// address in the message; baseline: two goroutines and two unbuffered channels.
func BenchmarkPingPong(b *testing.B) {
	const n = 500_000
	sys := newBenchSystem(b)
	var base, actor time.Duration
	for b.Loop() {
		base += pingPongChannel(n)
		actor += pingPongActor(b, sys, n)
	}
	report(b, "roundtrip", n*b.N, base, actor)
}

func pingPongChannel(n int) time.Duration {
	pings, pongs := make(chan int), make(chan int)
	start := time.Now()
	go func() {
		for v := range pings {
			pongs <- v
		}
	}()
	for i := range n {
		pings <- i
		<-pongs
	}
	close(pings)
	return time.Since(start)
}

func pingPongActor(b *testing.B, sys *trt.System, n int) time.Duration {
	done := make(chan struct{})
	echo := func() trt.Behavior[ping] {
		return trt.ReceiveFunc(func(ctx *trt.Context[ping], m ping) {
			if m.left == 0 {
				close(done)
				return
			}
			m.reply.Tell(ping{left: m.left - 1, reply: ctx.Self()})
		})
	}
	a, err := trt.Spawn(sys, "", echo)
	if err != nil {
		b.Fatal(err)
	}
	bb, err := trt.Spawn(sys, "", echo)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	a.Tell(ping{left: 2 * n, reply: bb})
	<-done
	d := time.Since(start)
	sys.Stop(a)
	sys.Stop(bb)
	return d
}

type request struct {
	n     int
	reply trt.Ref[int]
}

// BenchmarkAsk: 200,000 sequential asks from plain Go code; baseline: a
// request with its own reply channel sent to a serving goroutine.
func BenchmarkAsk(b *testing.B) {
	const n = 200_000
	sys := newBenchSystem(b)
	var base, actor time.Duration
	for b.Loop() {
		base += askChannel(n)
		actor += askActor(b, sys, n)
	}
	report(b, "ask", n*b.N, base, actor)
}

func askChannel(n int) time.Duration {
	type req struct {
		n     int
		reply chan int
	}
	reqs := make(chan req)
	go func() {
		for r := range reqs {
			r.reply <- r.n + 1
		}
	}()
	start := time.Now()
	for i := range n {
		r := req{n: i, reply: make(chan int, 1)}
		reqs <- r
		if <-r.reply != i+1 {
			panic("wrong reply")
		}
	}
	close(reqs)
	return time.Since(start)
}

func askActor(b *testing.B, sys *trt.System, n int) time.Duration {
	ref, err := trt.Spawn(sys, "", func() trt.Behavior[request] {
		return trt.ReceiveFunc(func(_ *trt.Context[request], r request) { r.reply.Tell(r.n + 1) })
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	for i := range n {
		got, err := trt.Ask(ctx, ref, func(reply trt.Ref[int]) request { return request{n: i, reply: reply} })
		if err != nil || got != i+1 {
			b.Fatalf("ask %d: %v %v", i, got, err)
		}
	}
	d := time.Since(start)
	sys.Stop(ref)
	return d
}

// BenchmarkSpawn: 100,000 idle actors: time and heap per actor; baseline: a
// goroutine per actor blocked on its own channel.
func BenchmarkSpawn(b *testing.B) {
	const n = 100_000
	var baseNs, actorNs, baseBytes, actorBytes float64
	for b.Loop() {
		d, bytes := spawnGoroutines(n)
		baseNs, baseBytes = baseNs+float64(d.Nanoseconds())/n, baseBytes+bytes/n
		d, bytes = spawnActors(b, n)
		actorNs, actorBytes = actorNs+float64(d.Nanoseconds())/n, actorBytes+bytes/n
	}
	k := float64(b.N)
	b.ReportMetric(actorNs/k, "ns/actor")
	b.ReportMetric(actorBytes/k, "B/actor")
	b.ReportMetric(baseNs/k, "goroutine-ns/actor")
	b.ReportMetric(baseBytes/k, "goroutine-B/actor")
	b.Logf("spawn: runtime %.0f ns and %.0f B per idle actor; goroutine+channel %.0f ns and %.0f B",
		actorNs/k, actorBytes/k, baseNs/k, baseBytes/k)
}

func heapInUse() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

func spawnGoroutines(n int) (time.Duration, float64) {
	before := heapInUse()
	var wg sync.WaitGroup
	chans := make([]chan int, n)
	start := time.Now()
	for i := range chans {
		chans[i] = make(chan int)
		wg.Add(1)
		go func(c chan int) {
			defer wg.Done()
			<-c
		}(chans[i])
	}
	d := time.Since(start)
	var stacks runtime.MemStats
	runtime.ReadMemStats(&stacks)
	bytes := heapInUse() - before + float64(stacks.StackInuse)
	for _, c := range chans {
		close(c)
	}
	wg.Wait()
	return d, bytes
}

func spawnActors(b *testing.B, n int) (time.Duration, float64) {
	sys := trt.NewSystem("spawn")
	defer func() { _ = sys.Shutdown(context.Background()) }()
	noop := func() trt.Behavior[int] { return trt.ReceiveFunc(func(*trt.Context[int], int) {}) }
	refs := make([]trt.Ref[int], n)
	before := heapInUse()
	start := time.Now()
	for i := range refs {
		ref, err := trt.Spawn(sys, "", noop)
		if err != nil {
			b.Fatal(err)
		}
		refs[i] = ref
	}
	d := time.Since(start)
	bytes := heapInUse() - before - float64(n*16) // minus the refs slice itself
	runtime.KeepAlive(refs)
	return d, bytes
}
