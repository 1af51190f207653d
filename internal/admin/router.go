// Package admin owns the admin API of the service: the operator's routes
// under /admin (the timers, the cluster's members and shards, and the
// consumers' dead letters, the workflows: package api/admin's generated interface),
// guarded by the admin token, and the framework's contract at
// /admin/openapi.yaml.
package admin

import (
	"github.com/go-chi/chi/v5"
	"github.com/jonboulle/clockwork"
	"github.com/trellis-go/trellis/components"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/internal/console"
	"github.com/trellis-go/trellis/internal/httpserver"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/views"
	"github.com/trellis-go/trellis/workflows"
)

// Options configure the admin routes.
type Options struct {
	// Token is the admin token; "" disables the admin API (403).
	Token string
	// Timers is the scheduler the timer routes inspect.
	Timers *timers.Scheduler
	// Store is the state store the timers live in; the console asks it
	// whether it answers.
	Store console.Store
	// Clock is the service's clock, the one the console's chart counts from.
	Clock clockwork.Clock
	// Cluster is the instance's cluster, which /admin/cluster reads; nil
	// when the instance is not part of one.
	Cluster Cluster
	// Consumers runs the service's consumers, whose dead letters the
	// consumer routes list, retry and drop.
	Consumers *consumers.Runner
	// Views runs the service's views, whose lag /admin/views shows.
	Views *views.Runner
	// Registry holds the service's components: the journal routes ask an
	// event-sourced type whether an entity loads; nil: they do not ask.
	Registry *components.Registry
	// Workflows are the service's started workflow types, which the
	// workflow routes list, inspect and act on.
	Workflows *workflows.Runners
}

// Register adds the admin routes to r: GET /admin/openapi.yaml (the
// framework's contract, open like the other system routes) and, in a group
// of their own so that the token is checked before anything else of the
// request, parameters included, the timer routes; and the operator console
// at /admin/console, whose page and assets carry no secret and whose data
// comes through the same token (all of it refused without one). chi prefers
// a static segment to a parameter, so GET /admin/timers/stats is the stats
// route however the routes are registered.
func Register(r chi.Router, o Options) {
	r.Get("/admin/openapi.yaml", httpserver.ServeSpec(api.Spec))
	r.Group(func(g chi.Router) {
		g.Use(adminAuth(o.Token), httpserver.CheckQuery)
		adminapi.HandlerWithOptions(&server{timers: o.Timers, cluster: o.Cluster, consumers: o.Consumers, views: o.Views,
			journals: journalsOf(o.Store), registry: o.Registry, workflows: o.Workflows}, adminapi.ChiServerOptions{
			BaseRouter:       g,
			ErrorHandlerFunc: api.WriteParamError,
		})
	})
	r.Mount("/admin/console", console.New(console.Options{
		Timers: o.Timers, Store: o.Store, Auth: adminAuth(o.Token), Enabled: o.Token != "", Clock: o.Clock,
	}))
}
