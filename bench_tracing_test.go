package trellis_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// BenchmarkHTTPEntityRoundTripTracing: the round trip of
// BenchmarkHTTPEntityRoundTrip (POST increase, GET, on Redis, a cluster
// of one) on two instances in the same run, taking turns: one with
// tracing off (no OTEL_* variable: the default), one tracing and
// sampling every request, exporting over OTLP/HTTP to a collector in the
// process that reads and discards what it gets. It reports both rates,
// the ratio (on ÷ off) and the CPU time per request of each.
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
	for _, s := range []*trellistest.Service{off, on} {
		if _, err := runLoad(client, s.URL, benchWorkers*4, false); err != nil {
			b.Fatal(err)
		}
	}
	offRes, onRes := takeTurns(b, client, [2]string{off.URL, on.URL}, false)
	b.ReportMetric(offRes.rps(), "off-req/s")
	b.ReportMetric(onRes.rps(), "on-req/s")
	b.ReportMetric(onRes.rps()/offRes.rps(), "x-off")
	b.ReportMetric(offRes.cpuPerReq(), "off-cpu-us/req")
	b.ReportMetric(onRes.cpuPerReq(), "on-cpu-us/req")
	b.Logf("tracing off %.0f req/s p99 %v %.1f CPU-µs/req; on (all sampled, exported) %.0f req/s p99 %v %.1f CPU-µs/req; ratio %.2fx",
		offRes.rps(), offRes.p99(), offRes.cpuPerReq(), onRes.rps(), onRes.p99(), onRes.cpuPerReq(), onRes.rps()/offRes.rps())
}
