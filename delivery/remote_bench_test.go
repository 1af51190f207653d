package delivery_test

import (
	goruntime "runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/runtime"
)

// BenchmarkRemotePointToPoint measures point to point between two
// instances over loopback (the real transport, HTTP/2 h2c, in one process),
// window 50, and in the same run the bare stream: the same messages told
// over the same transport to an actor of the other instance with no
// delivery protocol (a sender that retries when the transport's queue is
// full). Bytes and allocations per message are the whole process's, both
// instances together.
//
// Also in the same run, the windowed bare stream: the bare stream held to
// the protocol's flow control and nothing else (the receiver grants
// window/2 more each time window/2 remain, as a consumer controller's
// Request does; no sequence numbers, confirmations or resends). Its rate
// against the bare stream's (windowed-x-bare) is the most that any
// protocol granting demand that way can reach over this transport, bound
// by the round trip of a grant.
func BenchmarkRemotePointToPoint(b *testing.B) {
	n := max(b.N, 1000)
	bare := measure(func() { remoteBare(b, n) })
	windowed := measure(func() { remoteWindowed(b, n, 50) })
	p2p := measure(func() { remoteP2P(b, n) })
	b.ReportMetric(bare.elapsed.Seconds()/windowed.elapsed.Seconds(), "windowed-x-bare")
	b.ReportMetric(float64(n)/p2p.elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(n)/bare.elapsed.Seconds(), "bare-msgs/s")
	b.ReportMetric(bare.elapsed.Seconds()/p2p.elapsed.Seconds(), "x-bare")
	b.ReportMetric(float64(p2p.bytes)/float64(n), "B/msg")
	b.ReportMetric(float64(p2p.mallocs)/float64(n), "allocs/msg")
	b.ReportMetric(float64(bare.bytes)/float64(n), "bare-B/msg")
	b.ReportMetric(float64(bare.mallocs)/float64(n), "bare-allocs/msg")
}

type measured struct {
	elapsed        time.Duration
	bytes, mallocs uint64
}

func measure(run func()) measured {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	start := time.Now()
	run()
	m := measured{elapsed: time.Since(start)}
	goruntime.ReadMemStats(&after)
	m.bytes, m.mallocs = after.TotalAlloc-before.TotalAlloc, after.Mallocs-before.Mallocs
	return m
}

// countTo spawns an actor on sys that counts ints and closes done at n.
func countTo(b *testing.B, sys *runtime.System, n int, done chan struct{}) runtime.Ref[int] {
	var got atomic.Int64
	ref, err := runtime.Spawn(sys, "", func() runtime.Behavior[int] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[int], _ int) {
			if got.Add(1) == int64(n) {
				close(done)
			}
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	return ref
}

// remoteBare tells n ints, as JSON, straight over the transport.
func remoteBare(b *testing.B, n int) {
	a, c := remotetest.NewDirectNode(b, "bare-a", nil), remotetest.NewDirectNode(b, "bare-b", nil)
	done := make(chan struct{})
	at, err := runtime.Expose(c.Sys, countTo(b, c.Sys, n, done))
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for i := 1; i <= n; i++ {
		msg := strconv.AppendInt(nil, int64(i), 10) // what runtime.JSONCodec[int] writes
		for err := a.Client.Tell(at.Addr, at.Path, msg); err != nil; err = a.Client.Tell(at.Addr, at.Path, msg) {
			if time.Now().After(deadline) {
				b.Fatalf("the bare stream: message %d not taken within %v: %v", i, waitLimit, err)
			}
			goruntime.Gosched() // the queue is full: the bare stream's only flow control
		}
	}
	waitAll(b, done, "the bare stream", a)
}

// remoteWindowed tells n ints as remoteBare does, but only up to what the
// receiver has granted: window at first, then window/2 more each time the
// receiver counts the message window/2 before the end of its last grant.
func remoteWindowed(b *testing.B, n, window int) {
	a, c := remotetest.NewDirectNode(b, "win-a", nil), remotetest.NewDirectNode(b, "win-b", nil)
	var granted atomic.Int64
	granted.Store(int64(window))
	more := make(chan struct{}, 1)
	grants, err := runtime.Spawn(a.Sys, "grants", func() runtime.Behavior[int] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[int], upTo int) {
			granted.Store(int64(upTo))
			select {
			case more <- struct{}{}:
			default:
			}
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	grantsAt, err := runtime.Expose(a.Sys, grants)
	if err != nil {
		b.Fatal(err)
	}
	grantTo := runtime.RemoteRef[int](c.Sys, grantsAt.Addr, grantsAt.Path)
	done := make(chan struct{})
	counter, err := runtime.Spawn(c.Sys, "", func() runtime.Behavior[int] {
		got, requested := 0, window
		return runtime.ReceiveFunc(func(_ *runtime.Context[int], _ int) {
			got++
			if requested-got == window/2 {
				requested += window / 2
				grantTo.Tell(requested)
			}
			if got == n {
				close(done)
			}
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	at, err := runtime.Expose(c.Sys, counter)
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for i := 1; i <= n; i++ {
		for int64(i) > granted.Load() {
			select {
			case <-more:
			case <-time.After(time.Until(deadline)):
				b.Fatalf("the windowed stream: no grant for message %d within %v", i, waitLimit)
			}
		}
		msg := strconv.AppendInt(nil, int64(i), 10)
		for err := a.Client.Tell(at.Addr, at.Path, msg); err != nil; err = a.Client.Tell(at.Addr, at.Path, msg) {
			if time.Now().After(deadline) {
				b.Fatalf("the windowed stream: message %d not taken within %v: %v", i, waitLimit, err)
			}
			goruntime.Gosched()
		}
	}
	waitAll(b, done, "the windowed stream", a, c)
}

// remoteP2P sends n ints from a producer on one instance to a consumer on
// the other, through their controllers, window 50.
func remoteP2P(b *testing.B, n int) {
	a, c := remotetest.NewDirectNode(b, "p2p-a", nil), remotetest.NewDirectNode(b, "p2p-b", nil)
	done := make(chan struct{})
	pc, err := delivery.SpawnProducerController[int](a.Sys, "pc", "bench", delivery.ProducerSettings{})
	if err != nil {
		b.Fatal(err)
	}
	at, err := runtime.Expose(a.Sys, pc)
	if err != nil {
		b.Fatal(err)
	}
	cc, err := delivery.SpawnConsumerController[int](c.Sys, "cc", delivery.ConsumerSettings{FlowControlWindow: 50})
	if err != nil {
		b.Fatal(err)
	}
	sink := countTo(b, c.Sys, n, done)
	consumer, err := runtime.Spawn(c.Sys, "consumer", func() runtime.Behavior[delivery.Delivery[int]] {
		return runtime.ReceiveFunc(func(_ *runtime.Context[delivery.Delivery[int]], d delivery.Delivery[int]) {
			d.Confirm()
			sink.Tell(d.Message)
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	_, err = runtime.Spawn(a.Sys, "producer", func() runtime.Behavior[delivery.RequestNext[int]] {
		sent := 0
		return runtime.Funcs[delivery.RequestNext[int]]{
			Signal: func(ctx *runtime.Context[delivery.RequestNext[int]], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					pc.Tell(delivery.ProducerStart[int]{Producer: ctx.Self()})
				}
			},
			Message: func(_ *runtime.Context[delivery.RequestNext[int]], r delivery.RequestNext[int]) {
				if sent < n {
					sent++
					r.SendNextTo.Tell(sent)
				}
			},
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	cc.Tell(delivery.ConsumerStart[int]{DeliverTo: consumer})
	cc.Tell(delivery.RegisterToProducerController[int]{ProducerController: runtime.RemoteRef[delivery.ProducerCommand[int]](c.Sys, at.Addr, at.Path)})
	waitAll(b, done, "point to point", a, c)
}

// waitLimit bounds each part of a run.
const waitLimit = time.Minute

// waitAll waits for the last message of a run. The bare stream has no
// resends: a stream the transport broke loses messages, and the run fails
// instead of hanging; point to point resends them, and the run is slower.
// Either way the benchmark fails when a stream of the nodes broke.
func waitAll(b *testing.B, done chan struct{}, what string, nodes ...*remotetest.Node) {
	broken := func() (n uint64) {
		for _, node := range nodes {
			n += node.Client.StreamFailures()
		}
		return n
	}
	select {
	case <-done:
	case <-time.After(waitLimit):
		b.Fatalf("%s: not every message arrived within %v; %d tell streams broke", what, waitLimit, broken())
	}
	if n := broken(); n > 0 {
		b.Fatalf("%s: %d tell streams broke during the run: the figures would not be the transport's", what, n)
	}
}
