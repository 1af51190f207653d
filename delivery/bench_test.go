package delivery_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// The benchmarks run reliable delivery and, in the same process and on the
// same actor system, the plain runtime workloads it is compared with, and
// report both and their ratio. Run them with
//
//	go test -run '^$' -bench . -benchmem ./delivery/...
//
// BenchmarkDurable/redis (and the redisqueue benchmarks) need a Redis in
// TRELLIS_TEST_REDIS_URL, as the tests do; -delivery.benchworkers=N runs
// the actor system with N workers.

// onOwnSystem runs a workload on an actor system of its own, shut down
// after it, so that no workload finds another's actors, queues or worker
// placement, and returns what it measured.
func onOwnSystem[R any](run func(*runtime.System) R) R {
	sys := deliverytest.StartBenchSystem()
	defer func() { _ = sys.Shutdown(context.Background()) }()
	return run(sys)
}

// pingPong is a message of the request/response yardstick.
type pingPong struct {
	left  int
	reply runtime.Ref[pingPong]
}

// twoPingPongs runs two request/response loops of n round trips each at
// once: the floor of point-to-point delivery on this runtime, whose
// producer and consumer sides are one round trip per message each
// (RequestNext and message; Delivery and Confirmed).
func twoPingPongs(b *testing.B, sys *runtime.System, n int) time.Duration {
	loop := func(done chan struct{}) (runtime.Ref[pingPong], []runtime.AnyRef) {
		echo, err := runtime.Spawn(sys, "", func() runtime.Behavior[pingPong] {
			return runtime.ReceiveFunc(func(ctx *runtime.Context[pingPong], m pingPong) {
				m.reply.Tell(pingPong{left: m.left, reply: ctx.Self()})
			})
		})
		if err != nil {
			b.Fatal(err)
		}
		pinger, err := runtime.Spawn(sys, "", func() runtime.Behavior[pingPong] {
			return runtime.ReceiveFunc(func(ctx *runtime.Context[pingPong], m pingPong) {
				if m.left == 0 {
					close(done)
					return
				}
				echo.Tell(pingPong{left: m.left - 1, reply: ctx.Self()})
			})
		})
		if err != nil {
			b.Fatal(err)
		}
		return pinger, []runtime.AnyRef{echo, pinger}
	}
	d1, d2 := make(chan struct{}), make(chan struct{})
	p1, refs1 := loop(d1)
	p2, refs2 := loop(d2)
	start := time.Now()
	p1.Tell(pingPong{left: n})
	p2.Tell(pingPong{left: n})
	<-d1
	<-d2
	d := time.Since(start)
	for _, r := range append(refs1, refs2...) {
		sys.Stop(r)
	}
	return d
}

// bareMsg is a message of the bare delivery topology: what it is, and a
// number (a message's, or how many were confirmed).
type bareMsg struct {
	kind bareKind
	n    int
}

type bareKind uint8

const (
	bareNext      bareKind = iota // controller → producer: send one more
	bareSend                      // producer → controller: message n
	bareSequenced                 // controller → consumer controller: message n
	bareDeliver                   // consumer controller → consumer: message n
	bareConfirm                   // consumer → consumer controller
	bareRequest                   // consumer controller → controller: n confirmed
)

// bareTopology runs the actors and messages of point-to-point delivery with
// nothing else in their handlers: four actors, a producer that sends one
// message per permission, at most 50 in flight with demand renewed every
// 25, one delivery outstanding at a time. Its time per message is what the
// runtime alone costs in that shape, the floor under the controllers' work.
func bareTopology(b *testing.B, sys *runtime.System, n int) time.Duration {
	const window = 50
	done := make(chan struct{})
	var producer, pc, cc, consumer runtime.Ref[bareMsg]
	spawn := func(h func(bareMsg)) runtime.Ref[bareMsg] {
		ref, err := runtime.Spawn(sys, "", func() runtime.Behavior[bareMsg] {
			return runtime.ReceiveFunc(func(_ *runtime.Context[bareMsg], m bareMsg) { h(m) })
		})
		if err != nil {
			b.Fatal(err)
		}
		return ref
	}
	sent := 0
	producer = spawn(func(bareMsg) {
		if sent < n {
			sent++
			pc.Tell(bareMsg{kind: bareSend, n: sent})
		}
	})
	seq, confirmed, waiting := 0, 0, false
	pc = spawn(func(m bareMsg) {
		switch m.kind {
		case bareSend:
			seq = m.n
			cc.Tell(bareMsg{kind: bareSequenced, n: m.n})
			if seq-confirmed < window {
				producer.Tell(bareMsg{kind: bareNext})
			} else {
				waiting = true
			}
		case bareRequest:
			confirmed = m.n
			if waiting && seq-confirmed < window {
				waiting = false
				producer.Tell(bareMsg{kind: bareNext})
			}
		}
	})
	var stash []int
	out, delivered := false, 0
	cc = spawn(func(m bareMsg) {
		switch m.kind {
		case bareSequenced:
			if out {
				stash = append(stash, m.n)
				return
			}
			out = true
			consumer.Tell(bareMsg{kind: bareDeliver, n: m.n})
		case bareConfirm:
			if delivered++; delivered%(window/2) == 0 {
				pc.Tell(bareMsg{kind: bareRequest, n: delivered})
			}
			if len(stash) == 0 {
				out = false
				return
			}
			next := stash[0]
			stash = append(stash[:0], stash[1:]...)
			consumer.Tell(bareMsg{kind: bareDeliver, n: next})
		}
	})
	consumer = spawn(func(m bareMsg) {
		cc.Tell(bareMsg{kind: bareConfirm})
		if m.n == n {
			close(done)
		}
	})
	start := time.Now()
	producer.Tell(bareMsg{kind: bareNext})
	<-done
	d := time.Since(start)
	for _, r := range []runtime.AnyRef{producer, pc, cc, consumer} {
		sys.Stop(r)
	}
	return d
}

// BenchmarkPointToPoint: 1,000,000 small messages, window 50, telling and
// asking, against raw Tell of as many messages on the same system. Beside
// that ratio it prints yardsticks of the same shape (two ping-pong loops;
// the bare topology) and what a cache line costs to cross between
// processors and back, which decides how far a request/response loop falls
// behind raw tell on a given machine.
func BenchmarkPointToPoint(b *testing.B) {
	const n = 1_000_000
	for _, mode := range []string{"tell", "ask"} {
		b.Run(mode, func(b *testing.B) {
			var raw, floor, bare time.Duration
			var sum deliverytest.P2pRun
			runs := 0
			for b.Loop() {
				if !*deliverytest.FlagP2POnly {
					raw += onOwnSystem(func(sys *runtime.System) time.Duration { return testenv.TellN(b, sys, n) })
					floor += onOwnSystem(func(sys *runtime.System) time.Duration { return twoPingPongs(b, sys, n) })
					bare += onOwnSystem(func(sys *runtime.System) time.Duration { return bareTopology(b, sys, n) })
				}
				r := onOwnSystem(func(sys *runtime.System) deliverytest.P2pRun {
					return deliverytest.RunP2P(b, sys, deliverytest.P2pSpec{N: n, Ask: mode == "ask"})
				})
				sum.Elapsed += r.Elapsed
				sum.OutOfOrder += r.OutOfOrder
				sum.Mallocs += r.Mallocs
				sum.Bytes += r.Bytes
				sum.HeapGrowth += r.HeapGrowth
				runs++
			}
			msgs := float64(n * runs)
			perMsg := float64(sum.Elapsed.Nanoseconds()) / msgs
			perRaw := float64(raw.Nanoseconds()) / msgs
			perFloor := float64(floor.Nanoseconds()) / msgs
			perBare := float64(bare.Nanoseconds()) / msgs
			b.ReportMetric(perMsg, "ns/msg")
			b.ReportMetric(msgs/sum.Elapsed.Seconds(), "msgs/s")
			b.ReportMetric(float64(sum.Bytes)/msgs, "B/msg")
			b.ReportMetric(float64(sum.Mallocs)/msgs, "allocs/msg")
			b.ReportMetric(float64(sum.HeapGrowth)/msgs, "retained-B/msg")
			b.ReportMetric(float64(sum.OutOfOrder), "out-of-order")
			if *deliverytest.FlagP2POnly {
				b.Logf("%s: %.0f ns/msg (%.0f msgs/s), delivery alone; %.1f B and %.2f allocs per msg, %d out of order (n=%d x %d)",
					mode, perMsg, msgs/sum.Elapsed.Seconds(), float64(sum.Bytes)/msgs, float64(sum.Mallocs)/msgs, sum.OutOfOrder, n, runs)
				return
			}
			// Measured last, on an otherwise idle system.
			lineRT := testenv.LineRoundTrip(200_000)
			b.ReportMetric(float64(lineRT.Nanoseconds()), "line-rt-ns")
			b.ReportMetric(perRaw, "tell-ns/msg")
			b.ReportMetric(perRaw/perMsg, "x-tell")
			b.ReportMetric(perFloor, "2pingpong-ns/msg")
			b.ReportMetric(perFloor/perMsg, "x-2pingpong")
			b.ReportMetric(perBare, "bare-ns/msg")
			b.ReportMetric(perRaw/perBare, "bare-x-tell")
			b.Logf("%s: %.0f ns/msg (%.0f msgs/s), raw tell %.1f ns/msg, ratio %.3fx; two ping-pong loops %.0f ns per round trip, ratio %.2fx; "+
				"bare topology (same actors and messages, empty handlers) %.0f ns/msg, %.3fx raw tell; a cache line between processors and back %d ns; "+
				"%.1f B and %.2f allocs per msg, heap growth %.2f B/msg, %d out of order (n=%d x %d)",
				mode, perMsg, msgs/sum.Elapsed.Seconds(), perRaw, perRaw/perMsg, perFloor, perFloor/perMsg, perBare, perRaw/perBare, lineRT.Nanoseconds(),
				float64(sum.Bytes)/msgs, float64(sum.Mallocs)/msgs, float64(sum.HeapGrowth)/msgs, sum.OutOfOrder, n, runs)
		})
	}
}

// BenchmarkFastProducer: a producer 10 times faster than its consumer. With
// flow control the peak heap stays flat as N grows; raw tells from the same
// producer pile up in the consumer's mailbox.
func BenchmarkFastProducer(b *testing.B) {
	const consumerWork, producerWork = 2 * time.Microsecond, 200 * time.Nanosecond
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmtN(n), func(b *testing.B) {
			sys := deliverytest.NewBenchSystem(b)
			var r deliverytest.P2pRun
			var rawPeak uint64
			for b.Loop() {
				r = deliverytest.RunP2P(b, sys, deliverytest.P2pSpec{N: n, ConsumerWork: consumerWork, ProducerWork: producerWork, SamplePeak: true})
				rawPeak = max(rawPeak, rawTellPeak(b, sys, n, consumerWork, producerWork))
			}
			b.ReportMetric(float64(r.PeakHeap)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(rawPeak)/(1<<20), "tell-peak-heap-MiB")
			b.ReportMetric(float64(r.Elapsed.Nanoseconds())/float64(n), "ns/msg")
			b.Logf("n=%d: delivery peak heap %.1f MiB, raw tell peak heap %.1f MiB, %.0f ns/msg",
				n, float64(r.PeakHeap)/(1<<20), float64(rawPeak)/(1<<20), float64(r.Elapsed.Nanoseconds())/float64(n))
		})
	}
}

func fmtN(n int) string {
	switch n {
	case 100_000:
		return "N=1e5"
	case 1_000_000:
		return "N=1e6"
	}
	return "N"
}

// rawTellPeak is the fast producer without flow control: it tells n
// messages, spinning producerWork each, to a consumer spinning
// consumerWork each, and returns the peak heap.
func rawTellPeak(b *testing.B, sys *runtime.System, n int, consumerWork, producerWork time.Duration) uint64 {
	done := make(chan struct{})
	ref, err := runtime.Spawn(sys, "", func() runtime.Behavior[[4]int] {
		count := 0
		return runtime.ReceiveFunc(func(_ *runtime.Context[[4]int], _ [4]int) {
			deliverytest.Spin(consumerWork)
			if count++; count == n {
				close(done)
			}
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	goruntime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		deliverytest.SamplePeakHeap(&peak, stop)
	}()
	for i := range n {
		deliverytest.Spin(producerWork)
		ref.Tell([4]int{i}) // about a Delivery's size
	}
	<-done
	close(stop)
	wg.Wait()
	sys.Stop(ref)
	return peak.Load()
}

// BenchmarkDurable: point to point with a durable queue, in memory and in
// Redis: each message is stored before it is sent (stores pipelined, in
// batches while one is in flight: one round trip to the queue's goroutine
// per batch, and for Redis one to the server), and confirmations are
// written behind, with the stores. The redis run also runs the memory
// queue, alternating, as its baseline: it reports both rates, their ratio
// (x-memory), and what each allocates per message.
func BenchmarkDurable(b *testing.B) {
	const n = 20_000
	newQueue := func(b *testing.B, store string, run int) durable.Queue[int] {
		if store == "memory" {
			return durable.NewMemory[int]()
		}
		c := testenv.Redis(b)
		rq, err := redisqueue.New[int](c, fmt.Sprintf("trellis-bench:%d:%d", time.Now().UnixNano(), run), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rq.Delete(context.Background()) })
		return rq
	}
	// total sums the runs of one store.
	type total struct {
		elapsed        time.Duration
		mallocs, bytes uint64
		runs           int
	}
	run := func(b *testing.B, sys *runtime.System, store string, t *total) {
		r := deliverytest.RunP2P(b, sys, deliverytest.P2pSpec{N: n, Queue: newQueue(b, store, t.runs)})
		if r.OutOfOrder != 0 {
			b.Fatalf("%s: %d deliveries out of order", store, r.OutOfOrder)
		}
		t.elapsed += r.Elapsed
		t.mallocs += r.Mallocs
		t.bytes += r.Bytes
		t.runs++
	}
	rate := func(t total) float64 { return float64(n*t.runs) / t.elapsed.Seconds() }
	perMsg := func(v uint64, t total) float64 { return float64(v) / float64(n*t.runs) }
	for _, store := range []string{"memory", "redis"} {
		b.Run(store, func(b *testing.B) {
			sys := deliverytest.NewBenchSystem(b)
			var it, mem total
			for b.Loop() {
				run(b, sys, store, &it)
				if store == "redis" {
					run(b, sys, "memory", &mem)
				}
			}
			b.ReportMetric(rate(it), "msgs/s")
			b.ReportMetric(float64(it.elapsed.Nanoseconds())/float64(n*it.runs), "ns/msg")
			b.ReportMetric(perMsg(it.bytes, it), "B/msg")
			b.ReportMetric(perMsg(it.mallocs, it), "allocs/msg")
			if store == "redis" {
				b.ReportMetric(rate(mem), "memory-msgs/s")
				b.ReportMetric(rate(it)/rate(mem), "x-memory")
				b.ReportMetric(perMsg(mem.bytes, mem), "memory-B/msg")
				b.ReportMetric(perMsg(mem.mallocs, mem), "memory-allocs/msg")
			}
		})
	}
}
