package httpserver

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/internal/tracing"
)

// traceRequests is the middleware that makes each request a server span
// of tp, continuing the trace of a client's W3C traceparent. Probes and
// scrapes (/healthz, /readyz, /metrics) are not traced. The span is
// named after the route pattern once routing has found it (see
// nameSpan). The request metrics are the service's own (Metrics), so
// otelhttp's are not recorded.
func traceRequests(tp trace.TracerProvider) func(http.Handler) http.Handler {
	return otelhttp.NewMiddleware("HTTP",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(tracing.Propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithFilter(func(r *http.Request) bool { return !quietPath(r.URL.Path) }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return methodLabel(r.Method) }),
	)
}

// nameSpan gives the request's span its name ("METHOD /route/{pattern}")
// and sets its http.route, once the route is known: chi routes inside
// the middleware, so the name otelhttp gave at the start had no route
// yet.
func nameSpan(r *http.Request, name, route string) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	span.SetName(name)
	span.SetAttributes(attribute.String("http.route", route))
}

// quietPath: probes and scrapes, logged at debug and not traced, so that
// they do not drown the rest.
func quietPath(p string) bool { return p == "/healthz" || p == "/readyz" || p == "/metrics" }
