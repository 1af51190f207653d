package httpserver

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/internal/tracing"
)

// The request span's attributes, as OpenTelemetry's HTTP semantic
// conventions name them.
const (
	attrMethod = attribute.Key("http.request.method")
	attrPath   = attribute.Key("url.path")
	attrRoute  = attribute.Key("http.route")
	attrStatus = attribute.Key("http.response.status_code")
)

// traceRequests is the middleware that makes each request a server span
// of tp, continuing the trace of a client's W3C traceparent. Probes and
// scrapes (/healthz, /readyz and /metrics) are not traced. The span is
// named after the route pattern once routing has found it (see
// nameSpan), and gets its status from the access log (see spanStatus),
// which wraps the response writer already: the middleware itself adds
// no wrapper and records only what the conventions require, so that a
// traced request costs little more than its span.
func traceRequests(tp trace.TracerProvider) func(http.Handler) http.Handler {
	tracer := tp.Tracer(tracing.Scope)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if quietPath(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			ctx := tracing.Extract(r.Context(), r.Header)
			ctx, span := tracer.Start(ctx, methodLabel(r.Method), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attrMethod.String(methodLabel(r.Method)), attrPath.String(r.URL.Path)))
			defer span.End()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// nameSpan names the request's span "METHOD /route/{pattern}" and sets
// its http.route, once the route is known: chi routes inside the
// middleware, so the name given at the start had no route yet.
func nameSpan(r *http.Request, method, route string) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	span.SetName(method + " " + route)
	span.SetAttributes(attrRoute.String(route))
}

// spanStatus records the response's status on the request's span: a
// server error (5xx) fails the span, with the status code as its
// error.type, as the conventions say; a client error does not.
func spanStatus(r *http.Request, status int) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	if status < 500 {
		span.SetAttributes(attrStatus.Int(status))
		return
	}
	code := strconv.Itoa(status)
	span.SetAttributes(attrStatus.Int(status), tracing.AttrErrorType.String(code))
	span.SetStatus(codes.Error, code)
}

// quietPath: probes and scrapes, logged at debug and not traced, so that
// they do not drown the rest.
func quietPath(p string) bool { return p == "/healthz" || p == "/readyz" || p == "/metrics" }
