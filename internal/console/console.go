package console

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/timers"
)

// Timers is what the console reads of the timer scheduler; a
// *timers.Scheduler is one.
type Timers interface {
	// List returns one page of the timers that match q.
	List(ctx context.Context, q timers.ListQuery) (timers.Page, error)
	// Ready is nil while this instance runs timers on a sound store: an
	// error wrapping timers.ErrStoreWiped after a wipe, timers.ErrNotStarted
	// when it does not run timers.
	Ready(ctx context.Context) error
}

// Store is the state store, asked only whether it answers.
type Store interface {
	Ping(ctx context.Context) error
}

// Options are what New needs.
type Options struct {
	// Timers is the timer scheduler. Required.
	Timers Timers
	// Store is the state store the timers live in. Required.
	Store Store
	// Auth guards the console's data endpoint: the admin API's bearer
	// token middleware, so that the console asks for exactly what the
	// admin API asks for. Required.
	Auth func(http.Handler) http.Handler
	// Enabled is false when no admin token is configured: then every
	// route of the console, the page included, goes through Auth, which
	// refuses them all the way it refuses the admin API's.
	Enabled bool
	// Clock is the service's clock, the one the timer store keeps time
	// with; the chart counts from its now. Nil means the real clock.
	Clock clockwork.Clock
}

// New returns the console's handler, to be mounted one level below the
// admin API (at /admin/console when the admin API is at /admin): the page
// finds the admin API at "../" from its own address. Its routes:
//
//	GET /                 the page (a request without the trailing slash is redirected to it)
//	GET /assets/{file}    the script, the style sheet and the icon
//	GET /api/overview     the store's state and the chart of due timers (behind Auth)
//
// New panics if Timers, Store or Auth is nil: that is a wiring mistake,
// found when the service is built rather than on a request.
func New(o Options) http.Handler {
	if o.Timers == nil || o.Store == nil || o.Auth == nil {
		panic("console.New: Timers, Store and Auth are required")
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	r := chi.NewRouter()
	r.Use(secureHeaders)
	if !o.Enabled {
		r.Use(o.Auth)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		api.WriteProblem(w, r, http.StatusNotFound, "no console page "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// Everything in the console is read with GET; a delete goes to the
		// admin API.
		w.Header().Set("Allow", http.MethodGet)
		api.WriteProblem(w, r, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+": the console is read with GET")
	})
	r.Get("/", servePage)
	r.Get("/assets/{file}", serveAsset)
	r.With(o.Auth).Get("/api/overview", overviewHandler(o))
	return r
}

// contentSecurityPolicy allows the page its own script, style sheet, icon
// and requests to its own origin, and nothing else: no inline script or
// style, no framing, no form submission (the token form is handled by the
// script, so even a page whose script failed cannot send it anywhere).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// secureHeaders sets the headers every console response carries.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}
