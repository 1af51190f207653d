package runtime_test

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	trt "github.com/trellis-go/trellis/runtime"
)

// BenchmarkAskUnderLoad: the latency of sequential asks from plain Go code
// while 16 pairs of goroutines pass messages back and forth, each side
// doing about 10 µs of arithmetic per message; baseline: a request with
// its own reply channel to a serving goroutine, under the same load, in
// blocks taking turns with the asks. The pairs pass their messages
//
//   - tcp-echo: over loopback TCP (a service busy with requests);
//   - channel-handoff: over unbuffered channels, so that each pair keeps
//     a processor busy handing it back and forth, never waiting in a run
//     queue, and every processor is taken.
func BenchmarkAskUnderLoad(b *testing.B) {
	b.Run("tcp-echo", func(b *testing.B) { benchAskUnderLoad(b, echoLoad, 20, 1000) })
	b.Run("channel-handoff", func(b *testing.B) { benchAskUnderLoad(b, handoffLoad, 4, 50) })
}

// benchAskUnderLoad measures blocks of perBlock asks and as many channel
// requests, taking turns, under the load that load starts.
func benchAskUnderLoad(b *testing.B, load func(*testing.B, int, *atomic.Int64) func(), blocks, perBlock int) {
	sys := newBenchSystem(b)
	ref, err := trt.Spawn(sys, "", func() trt.Behavior[request] {
		return trt.ReceiveFunc(func(_ *trt.Context[request], r request) { r.reply.Tell(r.n + 1) })
	})
	if err != nil {
		b.Fatal(err)
	}
	var echoes atomic.Int64
	stop := load(b, 16, &echoes)
	defer stop()
	loadStart := time.Now()

	type req struct {
		n     int
		reply chan int
	}
	reqs := make(chan req)
	defer close(reqs)
	go func() {
		for r := range reqs {
			r.reply <- r.n + 1
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var asks, chans []time.Duration
	for b.Loop() {
		for range blocks {
			for i := range perBlock {
				start := time.Now()
				got, err := trt.Ask(ctx, ref, func(reply trt.Ref[int]) request { return request{n: i, reply: reply} })
				if err != nil || got != i+1 {
					b.Fatalf("ask %d: %v %v", i, got, err)
				}
				asks = append(asks, time.Since(start))
			}
			for i := range perBlock {
				start := time.Now()
				r := req{n: i, reply: make(chan int, 1)}
				reqs <- r
				select {
				case got := <-r.reply:
					if got != i+1 {
						b.Fatalf("channel %d: %d", i, got)
					}
				case <-ctx.Done():
					b.Fatal(ctx.Err())
				}
				chans = append(chans, time.Since(start))
			}
		}
	}
	b.ReportMetric(float64(echoes.Load())/time.Since(loadStart).Seconds(), "load-msgs/s")
	slices.Sort(asks)
	slices.Sort(chans)
	at := func(d []time.Duration, q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Nanoseconds()) }
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", .5}, {"p99", .99}, {"p999", .999}} {
		b.ReportMetric(at(asks, q.q), q.name+"-ns/ask")
		b.ReportMetric(at(chans, q.q), "chan-"+q.name+"-ns")
	}
	b.Logf("under load: ask p50 %.0f ns, p99 %.0f ns, p99.9 %.0f ns; channel p50 %.0f ns, p99 %.0f ns, p99.9 %.0f ns (%d each)",
		at(asks, .5), at(asks, .99), at(asks, .999), at(chans, .5), at(chans, .99), at(chans, .999), len(asks))
}

// echoLoad starts pairs of goroutines that send a 64-byte message back and
// forth over loopback TCP, each side spinning about 10 µs per message and
// counting it in sent; the function it returns stops them and waits for
// them.
func echoLoad(b *testing.B, pairs int, sent *atomic.Int64) func() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var stopped atomic.Bool
	var wg sync.WaitGroup
	echo := func(c net.Conn, first bool) {
		defer c.Close()
		buf := make([]byte, 64)
		for !stopped.Load() {
			if !first {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
			}
			first = false
			spinWork()
			if _, err := c.Write(buf); err != nil {
				return
			}
			sent.Add(1)
		}
	}
	for range pairs {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { echo(c, true) })
		wg.Go(func() { echo(s, false) })
	}
	return func() {
		stopped.Store(true)
		ln.Close()
		wg.Wait()
	}
}

// handoffLoad starts pairs of goroutines that hand a value back and forth
// over unbuffered channels, each side spinning about 10 µs per message and
// counting it in sent; the function it returns stops them and waits for
// them.
func handoffLoad(b *testing.B, pairs int, sent *atomic.Int64) func() {
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for range pairs {
		ping, pong := make(chan struct{}), make(chan struct{})
		wg.Go(func() {
			defer close(ping)
			for !stopped.Load() {
				spinWork()
				ping <- struct{}{}
				<-pong
				sent.Add(2)
			}
		})
		wg.Go(func() {
			for range ping {
				spinWork()
				pong <- struct{}{}
			}
		})
	}
	return func() {
		stopped.Store(true)
		wg.Wait()
	}
}

// spun keeps spinWork's arithmetic from being optimised away.
var spun atomic.Int64

// spinWork is about 10 µs of arithmetic.
func spinWork() {
	x := 0
	for i := range 20000 {
		x += i * i
	}
	spun.Add(int64(x))
}
