package trellis

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/api/admin"
)

// newRouter is the service's HTTP handler: the middleware (outermost
// first: request id, access log, metrics, panic recovery, body limit,
// timeout), the service's own routes (health, metrics, the contract), the
// admin routes behind the admin token, and the application's routes
// generated from the contract. Unknown routes and wrong methods answer
// problems too.
//
// The metrics middleware sits outside panic recovery, so that a request
// whose handler panicked is counted with the 500 it was answered with.
func newRouter(cfg Config, logger *slog.Logger, h *Host, impl api.ServerInterface, m *serviceMetrics) http.Handler {
	r := chi.NewRouter()
	r.Use(
		requestID(logger),
		accessLog(logger),
		m.instrument,
		recoverPanics,
		limitBody(cfg.MaxBodyBytes),
		timeout(cfg.RequestTimeout),
	)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("no route %s", r.URL.Path))
	})
	r.MethodNotAllowed(methodNotAllowed(r))

	r.Get("/healthz", healthz)
	r.Get("/readyz", readyz(h))
	r.Get("/openapi.yaml", serveSpec)
	// Open like /healthz: see the contract's description of /metrics.
	r.Method(http.MethodGet, "/metrics", m.handler(logger))
	// The admin routes in a group of their own, so that the token is
	// checked before anything else of the request, parameters included.
	// chi prefers a static segment to a parameter, so GET
	// /admin/timers/stats is the stats route however the routes are
	// registered.
	r.Group(func(g chi.Router) {
		g.Use(adminAuth(cfg.AdminToken))
		admin.HandlerWithOptions(&adminServer{timers: h.Timers}, admin.ChiServerOptions{
			BaseRouter:       g,
			ErrorHandlerFunc: admin.WriteParamError,
		})
	})
	api.HandlerWithOptions(impl, api.ChiServerOptions{
		BaseRouter:       r,
		ErrorHandlerFunc: api.WriteParamError,
	})
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
			if routes.Match(chi.NewRouteContext(), m, r.URL.Path) {
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

// serveSpec serves the contract.
func serveSpec(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(api.Spec)
}
