package trellis_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// TestTraceForwardBetweenInstances: a command sent to an instance that
// does not own its entity is one trace across both: the forward (a
// client span) on the first, the command run on the owner (a server
// span under it, the traceparent carried in the signed peer request) and
// the owner's store write under that.
func TestTraceForwardBetweenInstances(t *testing.T) {
	spans := trellistest.NewSpans(t)
	insts := trellistest.StartInstances(t, 2, fixture.App, spans.Option())
	trellistest.WaitSettled(t, insts...)
	entry, owner := insts[0], insts[1]
	id := ""
	for i := 0; id == ""; i++ {
		if c := fmt.Sprintf("fwd-%d", i); owner.Serves("counter", c) && !entry.Serves("counter", c) {
			id = c
		}
	}
	if c := fixture.Counter(t, entry.Post(t, "/counters/"+id+"/increase", map[string]int{"by": 2})); c.Value != 2 {
		t.Fatalf("value %d, want 2", c.Value)
	}
	req := spans.Wait(t, "POST /counters/{id}/increase")
	call := spans.Child(t, req, "call counter.increase")
	fwd := spans.Child(t, call, "forward counter.increase")
	if fwd.SpanKind() != trace.SpanKindClient || trellistest.SpanAttr(fwd, "trellis.entity.id") != id {
		t.Fatalf("forward span: kind %v, attributes %v", fwd.SpanKind(), fwd.Attributes())
	}
	run := spans.Child(t, fwd, "run forwarded counter.increase")
	if run.SpanKind() != trace.SpanKindServer {
		t.Fatalf("the owner's span is of kind %v", run.SpanKind())
	}
	spans.Child(t, run, "entity save")
}

// TestTraceExportOverOTLP: with only the standard variables set, the
// service exports its spans over OTLP/HTTP to the collector they name
// (here a receiver in the test that decodes the protobuf), under the
// service name they give; the export is counted, and the request
// duration histogram carries the trace id as an exemplar.
func TestTraceExportOverOTLP(t *testing.T) {
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "trace-export-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	ts := trellistest.Start(t, fixture.App)

	if c := fixture.Counter(t, ts.Post(t, "/counters/otlp/increase", map[string]int{"by": 1})); c.Value != 1 {
		t.Fatalf("value %d", c.Value)
	}
	trellistest.Eventually(t, 10*time.Second, "the spans at the collector", func() bool {
		return rcv.has("POST /counters/{id}/increase") && rcv.has("call counter.increase") && rcv.has("entity save")
	})
	if got := rcv.serviceNames(); !strings.Contains(got, "trace-export-test") {
		t.Fatalf("service names %q", got)
	}
	traceID := rcv.traceIDOf("POST /counters/{id}/increase")
	metrics := scrape(t, ts, "application/openmetrics-text")
	if !strings.Contains(metrics, `trace_id="`+traceID+`"`) {
		t.Fatalf("no exemplar with trace id %s in the request durations", traceID)
	}
	trellistest.Eventually(t, 10*time.Second, "the export counted", func() bool {
		return strings.Contains(scrape(t, ts, ""), "trellis_tracing_spans_exported_total ") &&
			!strings.Contains(scrape(t, ts, ""), "trellis_tracing_spans_exported_total 0\n")
	})
}

// TestTraceDeadCollectorCostsNoRequest: with the collector unreachable
// and a tiny export queue, every request is still served, and the spans
// that found the queue full are dropped and counted.
func TestTraceDeadCollectorCostsNoRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nobody listens there now
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+dead)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2")
	ts := trellistest.Start(t, fixture.App)
	for i := range 20 {
		if c := fixture.Counter(t, ts.Post(t, "/counters/dead/increase", map[string]int{"by": 1})); c.Value != int64(i+1) {
			t.Fatalf("value %d, want %d", c.Value, i+1)
		}
	}
	if m := scrape(t, ts, ""); strings.Contains(m, "trellis_tracing_spans_dropped_total 0\n") ||
		!strings.Contains(m, "trellis_tracing_spans_dropped_total") {
		t.Fatalf("no drop counted:\n%s", grepLines(m, "trellis_tracing"))
	}
}

// TestTraceRefusesABadVariable: a bad OTEL_* value stops the service at
// start, naming the variable.
func TestTraceRefusesABadVariable(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_TRACES_SAMPLER_ARG", "2"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"},
		{"OTEL_SDK_DISABLED", "maybe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			if tc.name == "OTEL_TRACES_SAMPLER_ARG" {
				t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
			}
			_, err := trellis.New(trellis.Config{}, fixture.App, trellis.WithLogger(slog.New(slog.DiscardHandler)))
			var ce *trellis.ConfigError
			if !errors.As(err, &ce) || ce.Var != tc.name {
				t.Fatalf("New: %v, want a *ConfigError naming %s", err, tc.name)
			}
			var stderr bytes.Buffer
			code := trellis.Run(t.Context(), fixture.App, trellis.WithArgs(nil), trellis.WithGetenv(func(string) string { return "" }),
				trellis.WithStderr(&stderr), trellis.WithLogger(slog.New(slog.DiscardHandler)))
			if code != trellis.ExitInvalidConfig || !strings.Contains(stderr.String(), tc.name) {
				t.Fatalf("Run: exit %d, %q; want %d naming %s", code, stderr.String(), trellis.ExitInvalidConfig, tc.name)
			}
		})
	}
}

// scrape reads /metrics, in the format accept asks for.
func scrape(t *testing.T, ts *trellistest.Service, accept string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, ts.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := ts.Send(req)
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %v %v", resp, err)
	}
	return string(resp.Body)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// otlpReceiver is a collector's OTLP/HTTP traces endpoint: it decodes
// each export request's protobuf and keeps the spans.
type otlpReceiver struct {
	mu       sync.Mutex
	spans    map[string]string // name → trace id (hex)
	services []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.spans == nil {
		o.spans = map[string]string{}
	}
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				o.services = append(o.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans[s.GetName()] = fmt.Sprintf("%x", s.GetTraceId())
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (o *otlpReceiver) has(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.spans[name]
	return ok
}

func (o *otlpReceiver) traceIDOf(name string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.spans[name]
}

func (o *otlpReceiver) serviceNames() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.services, ",")
}

// TestRunMakesTracingGlobal: Run makes the service's tracing the
// process's OpenTelemetry globals, so that a span an application's
// library makes with otel.Tracer is exported with the service's.
func TestRunMakesTracingGlobal(t *testing.T) {
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	setup := func(_ *trellis.Host, r chi.Router) error {
		r.Get("/library", func(w http.ResponseWriter, r *http.Request) {
			_, span := otel.Tracer("some-library").Start(r.Context(), "library work")
			span.End()
		})
		return nil
	}
	watch := &listenWatch{addr: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- trellis.Run(ctx, setup, trellis.WithArgs([]string{"-addr", "127.0.0.1:0"}),
			trellis.WithGetenv(func(string) string { return "" }), trellis.WithStderr(io.Discard),
			trellis.WithLogger(slog.New(slog.NewJSONHandler(watch, nil))))
	}()
	addr := trellistest.Recv(t, watch.addr, 20*time.Second)
	resp, err := http.Get("http://" + addr + "/library")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	trellistest.Eventually(t, 10*time.Second, "the library's span at the collector", func() bool {
		return rcv.has("library work") && rcv.traceIDOf("library work") == rcv.traceIDOf("GET /library")
	})
	cancel()
	if c := trellistest.Recv(t, code, 20*time.Second); c != trellis.ExitOK {
		t.Fatalf("exit code %d", c)
	}
}
