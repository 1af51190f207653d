package httpserver

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// BenchmarkMiddleware is what each layer of the service's middleware costs
// a request, in process (httptest, no network): a POST with a small JSON
// body through a chi router with that layer, against the same router
// without it in the same run, taking turns. It reports both times and
// their difference, the layer's cost:
//
//	go test -run '^$' -bench Middleware ./internal/httpserver/
func BenchmarkMiddleware(b *testing.B) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	metrics, err := NewMetrics()
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		// name is the layer's.
		name string
		// layers are what the router runs before the handler.
		layers []func(http.Handler) http.Handler
	}{
		{"request-id", []func(http.Handler) http.Handler{requestID(logger)}},
		{"access-log", []func(http.Handler) http.Handler{accessLog(logger)}},
		{"metrics", []func(http.Handler) http.Handler{metrics.instrument}},
		{"recover", []func(http.Handler) http.Handler{recoverPanics}},
		{"body-limit", []func(http.Handler) http.Handler{limitBody(1<<20, nil)}},
		{"timeout", []func(http.Handler) http.Handler{timeout(30 * time.Second)}},
		{"get-head", []func(http.Handler) http.Handler{middleware.GetHead}},
		{"all", []func(http.Handler) http.Handler{requestID(logger), accessLog(logger), metrics.instrument,
			recoverPanics, limitBody(1<<20, nil), timeout(30 * time.Second), middleware.GetHead}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			with, bare := benchRouter(tc.layers...), benchRouter()
			var tWith, tBare time.Duration
			for b.Loop() {
				tBare += serveOnce(b, bare)
				tWith += serveOnce(b, with)
			}
			n := float64(b.N)
			b.ReportMetric(float64(tWith.Nanoseconds())/n, "with-ns/req")
			b.ReportMetric(float64(tBare.Nanoseconds())/n, "bare-ns/req")
			b.ReportMetric(float64((tWith-tBare).Nanoseconds())/n, "layer-ns/req")
		})
	}
}

// benchRouter is a chi router running layers before a handler that reads
// the body and answers a small JSON object, as an endpoint would.
func benchRouter(layers ...func(http.Handler) http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(layers...)
	r.Post("/counters/{id}/increase", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"bench","value":1}`))
	})
	return r
}

// serveOnce serves one request through h and returns how long it took.
func serveOnce(b *testing.B, h http.Handler) time.Duration {
	req := httptest.NewRequest(http.MethodPost, "/counters/bench/increase", strings.NewReader(`{"by":1}`))
	w := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(w, req)
	d := time.Since(start)
	if w.Code != http.StatusOK {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
	return d
}
