package trellis_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// BenchmarkHTTPEntityRoundTripTracing: the round trip of
// BenchmarkHTTPEntityRoundTrip (POST increase, GET, on Redis, a cluster
// of one) on two instances in the same run, taking turns: one with
// tracing off (no OTEL_* variable: the default), one tracing and
// sampling every request, exporting over OTLP/HTTP to a collector in the
// process that reads and discards what it gets. It reports both rates,
// the ratio (on ÷ off) and the CPU time per request of each.
//
// In the same run, the bare chi + go-redis handler of
// BenchmarkHTTPEntityRoundTrip takes turns with itself wrapped in
// otelhttp over the same SDK pipeline, exporter and collector: one span
// per request, where the stack makes two or three. Its ratio (bare-x-off)
// is what tracing costs a handler that does nothing else, the most any
// service on this SDK could reach here.
func BenchmarkHTTPEntityRoundTripTracing(b *testing.B) {
	url := trellistest.RedisURL(b)
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []trellistest.Option{trellistest.WithRedisURL(url), trellistest.WithLogger(logger),
		trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo })}
	start := func() *trellistest.Service {
		s := trellistest.StartInstances(b, 1, (&fixture.CounterApp{}).Setup, opts...)[0]
		trellistest.WaitSettled(b, s)
		return s
	}
	off := start()
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(collector.Close)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	b.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	on := start()

	client := newLoadClient()
	b.Cleanup(client.Close)
	bareOff, bareOn := startBare(b, url), startBareWith(b, url, bareTracing(b, collector.URL))
	for _, u := range []string{off.URL, on.URL, bareOff, bareOn} {
		if _, err := runLoad(client, u, benchWorkers*4, false); err != nil {
			b.Fatal(err)
		}
	}
	res := takePairTurns(b, client, false, [2]string{off.URL, on.URL}, [2]string{bareOff, bareOn})
	offRes, onRes, bOffRes, bOnRes := res[0][0], res[0][1], res[1][0], res[1][1]
	b.ReportMetric(offRes.rps(), "off-req/s")
	b.ReportMetric(onRes.rps(), "on-req/s")
	b.ReportMetric(onRes.rps()/offRes.rps(), "x-off")
	b.ReportMetric(offRes.cpuPerReq(), "off-cpu-us/req")
	b.ReportMetric(onRes.cpuPerReq(), "on-cpu-us/req")
	b.Logf("tracing off %.0f req/s p99 %v %.1f CPU-µs/req; on (all sampled, exported) %.0f req/s p99 %v %.1f CPU-µs/req; ratio %.2fx",
		offRes.rps(), offRes.p99(), offRes.cpuPerReq(), onRes.rps(), onRes.p99(), onRes.cpuPerReq(), onRes.rps()/offRes.rps())

	b.ReportMetric(bOnRes.rps()/bOffRes.rps(), "bare-x-off")
	b.ReportMetric(bOnRes.cpuPerReq()-bOffRes.cpuPerReq(), "bare-on-cpu-us/req-more")
	b.Logf("the bare handler: off %.0f req/s %.1f CPU-µs/req; in otelhttp, all sampled and exported %.0f req/s %.1f CPU-µs/req; ratio %.2fx",
		bOffRes.rps(), bOffRes.cpuPerReq(), bOnRes.rps(), bOnRes.cpuPerReq(), bOnRes.rps()/bOffRes.rps())
}

// bareTracing wraps a handler in otelhttp with a tracer provider built
// as the service builds its own: the SDK's batch processor and OTLP/HTTP
// exporter to endpoint, every request sampled.
func bareTracing(b *testing.B, endpoint string) func(http.Handler) http.Handler {
	exp, err := otlptracehttp.New(b.Context(), otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return otelhttp.NewMiddleware("HTTP", otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
}
