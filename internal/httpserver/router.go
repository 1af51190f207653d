// Package httpserver owns the service's HTTP layer: the router, its
// middleware (request id, access log, metrics by route pattern, panic
// recovery, body limit, timeout), problems for unknown routes and wrong
// methods, and the service's own routes (health, readiness, metrics, the
// application's contract). The admin routes and the application's routes
// are mounted on the router it makes.
package httpserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/api"
)

// Options configure the router.
type Options struct {
	// Logger gets the access log and the errors of the requests.
	Logger *slog.Logger
	// MaxBodyBytes is the largest request body accepted (413 above).
	MaxBodyBytes int64
	// LargeBodies are the paths whose bodies may be larger than
	// MaxBodyBytes, each with its own limit (an admin import of a whole
	// export, say).
	LargeBodies map[string]int64
	// RequestTimeout bounds each request's context (504 after it).
	RequestTimeout time.Duration
	// Metrics counts the requests and serves GET /metrics.
	Metrics *Metrics
	// Readiness is what GET /readyz checks.
	Readiness Readiness
	// Contract is the application's OpenAPI document, served at GET
	// /openapi.yaml; nil: that route is not there (404).
	Contract []byte
	// Tracing makes each request a span of its own, outermost, so that
	// the access log and everything the request does are inside it; nil:
	// no tracing, and no middleware for it.
	Tracing trace.TracerProvider
}

// New makes the service's router: the middleware (outermost first:
// the request's span when tracing, request id, access log, metrics, panic recovery, body limit, timeout,
// HEAD served by GET routes),
// the service's own routes (/healthz, /readyz, /metrics, /openapi.yaml),
// and problems for unknown routes and wrong methods. The admin routes and
// the application's routes are then added to it.
//
// The metrics middleware sits outside panic recovery, so that a request
// whose handler panicked is counted with the 500 it was answered with.
func New(o Options) *chi.Mux {
	r := chi.NewRouter()
	if o.Tracing != nil {
		r.Use(traceRequests(o.Tracing))
	}
	r.Use(
		requestID(o.Logger),
		accessLog(o.Logger),
		o.Metrics.instrument,
		recoverPanics,
		limitBody(o.MaxBodyBytes, o.LargeBodies),
		timeout(o.RequestTimeout),
		// HEAD on a GET route runs the GET handler; net/http drops the body.
		middleware.GetHead,
	)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("no route %s", r.URL.Path))
	})
	r.MethodNotAllowed(methodNotAllowed(r))

	r.Get("/healthz", healthz)
	r.Get("/readyz", readyz(o.Readiness))
	if o.Contract != nil {
		r.Get("/openapi.yaml", ServeSpec(o.Contract))
	}
	// Open like /healthz: see the contract's description of /metrics.
	r.Method(http.MethodGet, "/metrics", o.Metrics.handler(o.Logger))
	return r
}

// methodsToTry are the methods a 405's Allow header may list.
var methodsToTry = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

// methodNotAllowed answers 405 with the Allow header listing the methods
// the path has (chi sets it only in its own 405 handler).
func methodNotAllowed(routes chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range methodsToTry {
			// A GET route serves HEAD too (middleware.GetHead).
			if routes.Match(chi.NewRouteContext(), m, r.URL.Path) ||
				m == http.MethodHead && routes.Match(chi.NewRouteContext(), http.MethodGet, r.URL.Path) {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
		}
		api.WriteProblem(w, r, http.StatusMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path))
	}
}

// ServeSpec serves an OpenAPI document as YAML.
func ServeSpec(spec []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(spec)
	}
}
