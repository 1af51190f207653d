package deliverytest

import (
	"context"
	"flag"
	"io"
	"log/slog"
	goruntime "runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/runtime"
)

// NewBenchSystem starts a benchmark's actor system (see StartBenchSystem),
// shut down when b ends.
func NewBenchSystem(b *testing.B) *runtime.System {
	b.Helper()
	sys := StartBenchSystem()
	b.Cleanup(func() { _ = sys.Shutdown(context.Background()) })
	return sys
}

// StartBenchSystem starts an actor system for benchmarks: its log is
// discarded, so that logging costs nothing measured, and it has the workers
// of -delivery.benchworkers. The caller shuts it down.
func StartBenchSystem() *runtime.System {
	opts := []runtime.Option{runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	if *flagBenchWorkers > 0 {
		opts = append(opts, runtime.WithWorkers(*flagBenchWorkers))
	}
	return runtime.NewSystem("bench", opts...)
}

// benchProdMsg is the protocol of the benchmarks' producer: go, a
// RequestNext (by value: no allocation), or an ask's reply.
type benchProdMsg struct {
	start  runtime.Ref[delivery.ProducerCommand[int]]
	next   delivery.RequestNext[int]
	isNext bool
}

// P2pSpec describes a point-to-point run.
type P2pSpec struct {
	N            int           // messages
	Ask          bool          // the producer asks (MessageWithConfirmation) instead of telling
	ConsumerWork time.Duration // busy time per message in the consumer
	ProducerWork time.Duration // busy time per message in the producer
	SamplePeak   bool          // sample the peak heap while running
	settings     delivery.ConsumerSettings
	Queue        durable.Queue[int] // the producer controller's durable queue; nil: none
}

// P2pRun is the outcome of one run.
type P2pRun struct {
	Elapsed    time.Duration
	OutOfOrder int64  // deliveries that were not the next message: duplicates or gaps
	Mallocs    uint64 // heap allocations during the run
	Bytes      uint64 // bytes allocated during the run
	HeapGrowth int64  // live heap after the run minus before, each after a GC
	PeakHeap   uint64 // the most heap in use while running, when sampled
}

// Spin keeps the goroutine busy for d, as real work would.
func Spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// RunP2P sends spec.n ints from a producer through a producer controller
// and a consumer controller to a consumer, and waits for the last.
func RunP2P(b *testing.B, sys *runtime.System, spec P2pSpec) P2pRun {
	b.Helper()
	done := make(chan struct{})
	var opts []delivery.ProducerOption[int]
	if spec.Queue != nil {
		opts = append(opts, delivery.WithDurableQueue(spec.Queue))
	}
	pc, err := delivery.SpawnProducerController[int](sys, "", "bench", delivery.ProducerSettings{}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	cc, err := delivery.SpawnConsumerController[int](sys, "", spec.settings)
	if err != nil {
		b.Fatal(err)
	}
	var outOfOrder atomic.Int64
	consumer, err := runtime.Spawn(sys, "", func() runtime.Behavior[delivery.Delivery[int]] {
		last := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.Delivery[int]], d delivery.Delivery[int]) {
			Spin(spec.ConsumerWork)
			if d.Message != last+1 {
				outOfOrder.Add(1)
			}
			last = d.Message
			d.Confirm()
			if last == spec.N {
				close(done)
			}
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	producer, err := runtime.Spawn(sys, "", func() runtime.Behavior[benchProdMsg] {
		sent := 0
		return runtime.ReceiveFunc(func(ctx *runtime.Context[benchProdMsg], m benchProdMsg) {
			if m.start != nil {
				m.start.Tell(delivery.ProducerStart[int]{Producer: runtime.MessageAdapter(ctx, func(r delivery.RequestNext[int]) benchProdMsg {
					return benchProdMsg{next: r, isNext: true}
				})})
				return
			}
			if !m.isNext || sent == spec.N {
				return
			}
			Spin(spec.ProducerWork)
			sent++
			if !spec.Ask {
				m.next.SendNextTo.Tell(sent)
				return
			}
			v := sent
			runtime.AskFrom(ctx, m.next.AskNextTo, time.Minute,
				func(r runtime.Ref[delivery.SeqNr]) delivery.MessageWithConfirmation[int] {
					return delivery.MessageWithConfirmation[int]{Message: v, ReplyTo: r}
				},
				func(delivery.SeqNr, error) benchProdMsg { return benchProdMsg{} })
		})
	})
	if err != nil {
		b.Fatal(err)
	}

	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	if spec.SamplePeak {
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			SamplePeakHeap(&peak, stopSampling)
		}()
	}
	start := time.Now()
	cc.Tell(delivery.ConsumerStart[int]{DeliverTo: consumer})
	cc.Tell(delivery.RegisterToProducerController[int]{ProducerController: pc})
	producer.Tell(benchProdMsg{start: pc})
	<-done
	var out P2pRun
	out.Elapsed = time.Since(start)
	goruntime.ReadMemStats(&after)
	close(stopSampling)
	sampler.Wait()
	out.Mallocs = after.Mallocs - before.Mallocs
	out.Bytes = after.TotalAlloc - before.TotalAlloc
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	out.HeapGrowth = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	out.PeakHeap = peak.Load()
	out.OutOfOrder = outOfOrder.Load()
	for _, ref := range []runtime.AnyRef{producer, pc, cc, consumer} {
		sys.Stop(ref)
	}
	return out
}

// SamplePeakHeap records the most heap in use, every millisecond, until stop.
func SamplePeakHeap(peak *atomic.Uint64, stop <-chan struct{}) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		if v := s[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// CountingConsumer spawns a consumer that confirms every Delivery and
// closes done when all of them together have had n.
func CountingConsumer(b *testing.B, sys *runtime.System, total *atomic.Int64, n int64, done chan struct{}) func() runtime.Behavior[delivery.Delivery[int]] {
	return func() runtime.Behavior[delivery.Delivery[int]] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.Delivery[int]], d delivery.Delivery[int]) {
			d.Confirm()
			if total.Add(1) == n {
				close(done)
			}
		})
	}
}

// ReportPattern reports a pattern's throughput against point to point's.
func ReportPattern(b *testing.B, what string, n, runs int, pattern, p2p time.Duration) {
	msgs := float64(n * runs)
	rate, p2pRate := msgs/pattern.Seconds(), msgs/p2p.Seconds()
	b.ReportMetric(rate, "msgs/s")
	b.ReportMetric(p2pRate, "p2p-msgs/s")
	b.ReportMetric(rate/p2pRate, "x-p2p")
	b.ReportMetric(float64(pattern.Nanoseconds())/msgs, "ns/msg")
	b.Logf("%s: %.0f msgs/s; point to point %.0f msgs/s in the same run; ratio %.2f (n=%d x %d)", what, rate, p2pRate, rate/p2pRate, n, runs)
}

// PatternN is how many messages one run of a pattern benchmark sends.
const PatternN = 200_000

var (
	flagBenchWorkers = flag.Int("delivery.benchworkers", 0, "workers of the benchmarks' actor system (0: GOMAXPROCS, the default)")
	// FlagP2POnly (-delivery.p2ponly) makes BenchmarkPointToPoint measure
	// delivery alone, to profile it without the yardsticks' samples.
	FlagP2POnly = flag.Bool("delivery.p2ponly", false, "BenchmarkPointToPoint runs delivery alone, without its yardsticks (for profiling)")
)
