package httpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/internal/tracing"
)

// unmatchedRoute is the route label of a request that matched no route
// (404, 405): one series for all of them, whatever their paths.
const unmatchedRoute = "unmatched"

// maxScrapesInFlight bounds concurrent /metrics requests: each one queries
// the timer store for its gauges, so a scrape storm must not become a
// Redis storm.
const maxScrapesInFlight = 4

// Metrics is the service's Prometheus registry and its HTTP series. The
// registry is the service's own, not the global default, so that several
// services in one process (tests) do not collide, and it holds only what
// this service registered.
type Metrics struct {
	// Registry is where the service's series are; the application may
	// register its own collectors in it.
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	shed     prometheus.Counter
	// series caches the children of requests and duration by their labels:
	// WithLabelValues hashes the labels and takes a lock on every call,
	// while the label sets are few (methods × route patterns × codes).
	series sync.Map // seriesKey → *seriesPair
}

type seriesKey struct {
	method, route string
	code          int
}

type seriesPair struct {
	requests prometheus.Counter
	duration prometheus.Observer
	// spanName names the requests' spans: "METHOD /route/{pattern}".
	spanName string
	// exemplarAt is when each bucket of duration (the last one +Inf)
	// last got an exemplar from these requests, in Unix nanoseconds.
	exemplarAt []atomic.Int64
}

// durationBuckets are the request-duration histogram's upper bounds.
var durationBuckets = prometheus.DefBuckets

// exemplarEvery is the least time between two exemplars of one bucket of
// one series. A scrape sees only the newest exemplar of each bucket, so
// that one a second keeps every bucket leading to a recent trace, while
// an exemplar on every sampled request (each one allocating its labels)
// was a good part of what tracing cost a request.
const exemplarEvery = time.Second

// seriesFor returns the series of one label set, made on first use.
func (m *Metrics) seriesFor(method, route string, code int) *seriesPair {
	key := seriesKey{method, route, code}
	if p, ok := m.series.Load(key); ok {
		return p.(*seriesPair)
	}
	p := &seriesPair{
		requests:   m.requests.WithLabelValues(method, route, strconv.Itoa(code)),
		duration:   m.duration.WithLabelValues(method, route),
		spanName:   method + " " + route,
		exemplarAt: make([]atomic.Int64, len(durationBuckets)+1),
	}
	actual, _ := m.series.LoadOrStore(key, p)
	return actual.(*seriesPair)
}

// NewMetrics makes the registry with the given collectors (the timer
// scheduler's), the Go runtime and process collectors, and the HTTP series.
func NewMetrics(own ...prometheus.Collector) (*Metrics, error) {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "trellis", Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests served, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "trellis", Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time to serve HTTP requests, by method and route pattern.",
			Buckets: durationBuckets,
		}, []string{"method", "route"}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "trellis", Subsystem: "http", Name: "connections_shed_total",
			Help: "Connections closed to stay within the cap on open connections (see LimitConnections).",
		}),
	}
	for _, c := range append(own,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests,
		m.duration,
		m.shed,
	) {
		if err := m.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// instrument is the middleware that counts and times every request. It
// labels them with the chi route pattern (/admin/timers/{name}), read
// after routing, never with the raw path: paths carry ids, and a label per
// id would grow the series without bound. Unknown methods share one label
// for the same reason. It reads the status through the access log's
// wrapper when it sits inside it, rather than wrapping the writer again.
func (m *Metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		defer func() {
			method, route := methodLabel(r.Method), routeLabel(r)
			s := m.seriesFor(method, route, statusOf(ww))
			s.requests.Inc()
			now := time.Now()
			s.observe(r.Context(), now.Sub(start).Seconds(), now)
			nameSpan(r, s.spanName, route)
		}()
		next.ServeHTTP(ww, r)
	})
}

// observe records v in the request durations, with the request's trace
// id as its exemplar when the request is traced and sampled and its
// bucket is due one (exemplarEvery), so that a slow bucket leads to a
// trace.
func (s *seriesPair) observe(ctx context.Context, v float64, now time.Time) {
	sc := trace.SpanContextFromContext(ctx)
	if eo, ok := s.duration.(prometheus.ExemplarObserver); ok && sc.IsSampled() && s.exemplarDue(v, now) {
		eo.ObserveWithExemplar(v, prometheus.Labels{tracing.LogTraceID: sc.TraceID().String()})
		return
	}
	s.duration.Observe(v)
}

// exemplarDue says whether v's bucket has had no exemplar for
// exemplarEvery, and if so counts it as having one now.
func (s *seriesPair) exemplarDue(v float64, now time.Time) bool {
	at := &s.exemplarAt[sort.SearchFloat64s(durationBuckets, v)]
	last, t := at.Load(), now.UnixNano()
	return t-last >= int64(exemplarEvery) && at.CompareAndSwap(last, t)
}

// routeLabel is the pattern of the route r matched, or unmatchedRoute.
func routeLabel(r *http.Request) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			return p
		}
	}
	return unmatchedRoute
}

// methodLabel keeps the standard methods and folds any other into OTHER.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// handler serves the registry in the Prometheus text format (GET
// /metrics). A collector that fails (the timer store did not answer) does
// not fail the scrape: the other series are still served, and the error
// is logged and counted in promhttp_metric_handler_errors_total.
func (m *Metrics) handler(logger *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.Registry,
		MaxRequestsInFlight: maxScrapesInFlight,
		// The exemplars (trace ids on the request durations) are in the
		// OpenMetrics format only, which a scraper asks for.
		EnableOpenMetrics: true,
	})
}
