package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// BenchmarkForward measures a forward's round trip on loopback, serial
// and parallel, with a 256-byte argument echoed back, beside its
// yardstick: the same payload posted to a bare HTTP/2 echo handler over
// the same kind of connection, without the signatures, the envelope or
// the deadline; and the forward over mutual TLS ("peer-tls"). Each
// reports ns/op, allocs/op and the p50 and p99 of the
// single calls' latencies.
func BenchmarkForward(b *testing.B) {
	payload := json.RawMessage(`{"data":"` + strings.Repeat("x", 256-11) + `"}`)
	s := startServer(b, ServerConfig{Handler: echo}, &logBuffer{}, nil)
	c := newClient(b, ClientConfig{})
	call := Call{ComponentID: "orders", Method: "Place", EntityID: "order-42", Argument: payload}
	peer := func(ctx context.Context) error {
		_, err := c.Forward(ctx, s.Addr(), call)
		return err
	}
	ca := peertest.NewCA(b, "cluster CA")
	serverTLS, _ := load(b, issue(b, ca, "server"))
	_, clientTLS := load(b, issue(b, ca, "client"))
	sTLS := startServer(b, ServerConfig{Handler: echo, TLS: serverTLS}, &logBuffer{}, nil)
	cTLS := newClient(b, ClientConfig{TLS: clientTLS})
	peerTLS := func(ctx context.Context) error {
		_, err := cTLS.Forward(ctx, sTLS.Addr(), call)
		return err
	}
	bareAddr, bareClient := startBare(b)
	bare := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+bareAddr+"/echo", bytes.NewReader(payload))
		if err != nil {
			return err
		}
		resp, err := bareClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}

	for _, mode := range []string{"serial", "parallel"} {
		for _, target := range []struct {
			name string
			call func(context.Context) error
		}{{"peer", peer}, {"peer-tls", peerTLS}, {"bare", bare}} {
			b.Run(mode+"/"+target.name, func(b *testing.B) {
				run := runSerial
				if mode == "parallel" {
					run = runParallel
				}
				lat := run(b, target.call)
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
			})
		}
	}
}

// runSerial makes b.N calls one after the other and returns their
// latencies.
func runSerial(b *testing.B, call func(context.Context) error) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := call(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}

// runParallel makes b.N calls from GOMAXPROCS goroutines and returns
// their latencies.
func runParallel(b *testing.B, call func(context.Context) error) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var lat []time.Duration
		for pb.Next() {
			start := time.Now()
			if err := call(ctx); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(start))
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	return all
}

// startBare starts the yardstick: an HTTP/2-over-cleartext server that
// echoes the body, and a client set up as the peer client is (one
// connection), both closed at the end.
func startBare(b *testing.B) (string, *http.Client) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	tr := &http.Transport{Protocols: &p, MaxConnsPerHost: 1, HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: true}}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		<-done
	})
	return ln.Addr().String(), &http.Client{Transport: tr}
}

// BenchmarkTell measures told messages of 256 bytes from one client to
// one peer, from Tell to Receive: the stream's throughput, one message
// per op.
func BenchmarkTell(b *testing.B) {
	msg := bytes.Repeat([]byte("m"), 256)
	var got atomic.Int64
	all := make(chan struct{}, 1)
	var want atomic.Int64
	s := startServer(b, ServerConfig{Handler: echo, Receive: func(string, []byte) {
		if got.Add(1) == want.Load() {
			all <- struct{}{}
		}
	}}, &logBuffer{}, nil)
	c := newClient(b, ClientConfig{TellQueue: 4096})
	want.Store(got.Load() + int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		if err := c.Tell(s.Addr(), "actor/a", msg); err != nil {
			if errors.Is(err, ErrUnavailable) { // the queue is full: let the sender catch up
				runtime.Gosched()
				continue
			}
			b.Fatal(err)
		}
		i++
	}
	testenv.Recv(b, all, time.Minute)
}
