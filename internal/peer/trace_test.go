package peer

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// traced is a context whose span is a remote one of a known trace.
func traced(t *testing.T, spanHex string) context.Context {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, err := trace.SpanIDFromHex(spanHex)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(within(t, 5*time.Second), sc)
}

// TestForwardCarriesTheTraceContext: the handler on the owner runs in
// the caller's trace, under the caller's span; a call without one runs
// in none.
func TestForwardCarriesTheTraceContext(t *testing.T) {
	var got atomic.Value
	s := startServer(t, ServerConfig{Handler: func(ctx context.Context, c Call) (Reply, error) {
		got.Store(trace.SpanContextFromContext(ctx))
		return echo(ctx, c)
	}}, &logBuffer{}, nil)
	c := newClient(t, ClientConfig{})
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"traced", traced(t, "00f067aa0ba902b7")},
		{"untraced", within(t, 5*time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Forward(tc.ctx, s.Addr(), Call{ComponentID: "c", Method: "m", Argument: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			want := trace.SpanContextFromContext(tc.ctx)
			sc := got.Load().(trace.SpanContext)
			if sc.TraceID() != want.TraceID() || sc.SpanID() != want.SpanID() || want.IsValid() && !sc.IsRemote() {
				t.Fatalf("the handler's span context %v, want %v (remote)", sc, want)
			}
		})
	}
}

// TestAuthCoversTheTraceContext: the signature covers the traceparent
// and tracestate: a request whose trace context was altered, added or
// removed after signing is refused, and never reaches the handler.
func TestAuthCoversTheTraceContext(t *testing.T) {
	var calls atomic.Int32
	s := startServer(t, ServerConfig{Handler: countingEcho(&calls)}, &logBuffer{}, nil)
	sg, err := newSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	const (
		parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		other  = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
	)
	path, body := forwardPrefix+"c/m/e", []byte(`{}`)
	send := func(signedWith, sent traceHeaders) int {
		ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
		sig := sg.signForward(http.MethodPost, path, ts, "5s", signedWith, bodyDigest(body))
		req, err := http.NewRequestWithContext(within(t, 5*time.Second), http.MethodPost, "http://"+s.Addr()+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(headerTime, ts)
		req.Header.Set(headerTimeout, "5s")
		req.Header.Set(headerSignature, sig)
		req.Header.Set(headerBodyDigest, bodyDigest(body))
		if sent.parent != "" {
			req.Header.Set("traceparent", sent.parent)
		}
		if sent.state != "" {
			req.Header.Set("tracestate", sent.state)
		}
		resp, err := h2c(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	genuine := traceHeaders{parent: parent, state: "k=v"}
	if st := send(genuine, genuine); st != http.StatusOK {
		t.Fatalf("the genuine traced request: %d", st)
	}
	for _, tc := range []struct {
		name string
		sent traceHeaders
	}{
		{"altered traceparent", traceHeaders{parent: other, state: "k=v"}},
		{"altered tracestate", traceHeaders{parent: parent, state: "k=w"}},
		{"removed", traceHeaders{}},
	} {
		if st := send(genuine, tc.sent); st != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tc.name, st)
		}
	}
	if st := send(traceHeaders{}, traceHeaders{parent: parent}); st != http.StatusUnauthorized {
		t.Errorf("added after signing: %d, want 401", st)
	}
	if calls.Load() != 1 {
		t.Errorf("the handler ran %d times, want once", calls.Load())
	}
}
