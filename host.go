package trellis

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/assembly"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/views"
	"github.com/trellis-go/trellis/workflows"
)

// Host is what the application's setup starts its components on.
type Host struct {
	// Config is the service's configuration.
	Config Config
	// System is the actor system the components run on.
	System *runtime.System
	// Client is the component client: components register in its registry,
	// endpoints invoke them through it.
	Client *components.Client
	// Store keeps the entities' state: Redis, or the embedded in-memory store.
	Store entities.Store
	// Clock is the service's clock (a fake one under trellistest.Start).
	Clock clockwork.Clock
	// Logger is the service's logger.
	Logger *slog.Logger
	// Redis is the Redis client of the store; nil with the embedded store.
	// The service closes it at shutdown.
	Redis redis.UniversalClient
	// Timers is the timer scheduler, on the same store as the entities
	// (Redis, or in memory). It starts firing once setup has returned, so
	// that every component a timer may call is registered by then.
	Timers *timers.Scheduler
	// Metrics is the service's Prometheus registry, served at GET
	// /metrics. It holds the timer scheduler's series, the Go runtime and
	// process series and the HTTP request series; an application may
	// register its own collectors in it during setup.
	Metrics *prometheus.Registry
	// Idempotency keeps the answers of requests made with an
	// Idempotency-Key, in the same store as the entities (Redis, or
	// memory): see Idempotent.
	Idempotency api.IdempotencyStore
	// Tracing is the service's tracer provider, which the application
	// makes its own spans with (h.Tracing.Tracer("orders")); a no-op one
	// when tracing is off (see docs/observability.md).
	Tracing trace.TracerProvider

	// parts are what New built the service of, which the methods below
	// reach.
	parts assembly.Host
}

// Consumers is what consumers start on (consumers.Consumer.Start): the
// service's runner. It consumes once setup has returned, each shard on
// the instance that serves it (every shard, without a cluster), and
// stops at shutdown before the cluster hands the shards over. With Redis
// and the cluster mode off, Consumer.Start fails: the per-instance store
// keeps no change log.
func (h *Host) Consumers() *consumers.Runner { return h.parts.Consumers }

// Views is what views start on (views.View.Start) and what their queries
// read through: the service's runner. A view is projected once setup has
// returned, each shard on the instance that serves it (every shard,
// without a cluster); its queries answer on every instance. With Redis
// and the cluster mode off, View.Start fails: the per-instance store
// keeps no change log.
func (h *Host) Views() *views.Runner { return h.parts.Views }

// Workflows is the workflows.Host to start workflows on: their records on
// the entities' store (forwarded and fenced as entities are), their pause
// timers on the service's scheduler, each shard's workflows run by the
// instance that serves it. The service stops their runners at shutdown
// after the timers, before it hands its shards over. With Redis and the
// cluster mode off, Start fails: the per-instance store keeps no change
// log to find a shard's workflows in.
func (h *Host) Workflows() workflows.Host {
	return workflows.Host{Entities: h.Entities(), Timers: h.Timers, Runners: &h.parts.Workflows, Logger: h.Logger, Shards: h.parts.Shards}
}

// AddReadinessCheck adds an application's own readiness check: GET
// /readyz answers 503, with the reason "<name> is not ready" (the error
// goes to the log), while check returns an error. The checks run after
// the store's and the timer scheduler's, in the order added, within the
// probe's 2 s; keep them cheap (a producer handle's Err, say). Each is
// also the gauge trellis_readiness_check{check="<name>"} in /metrics: 1
// while it passes, 0 while it fails. Call it during setup; a name must be
// non-empty and not yet used.
func (h *Host) AddReadinessCheck(name string, check func(context.Context) error) error {
	return h.parts.AddReadinessCheck(name, check)
}

// show sets the exported fields to what New built, for setup.
func (h *Host) show() {
	p := &h.parts
	h.System, h.Client, h.Store, h.Clock, h.Logger = p.System, p.Client, p.Store, p.Clock, p.Logger
	h.Redis, h.Timers, h.Metrics, h.Idempotency, h.Tracing = p.Redis, p.Timers, p.Metrics, p.Idempotency, p.Tracing.Provider()
}

// idempotencySettle is how long past the request timeout an
// Idempotency-Key's claim is kept: time for its answer to be settled. A
// claim older than that belongs to a request that died (or whose answer
// could not be settled) and lapses, so a retry is not told "in progress"
// for long after a fault.
const idempotencySettle = 5 * time.Second

// Idempotent is the api.Idempotency middleware for the given routes
// ("POST /orders/{id}/confirm": the method and the chi pattern), over the
// host's store, keeping answers for Config.IdempotencyRetention and a
// claim for the request timeout and idempotencySettle. Put it in a generated handler's
// Middlewares, or on the routes with r.With.
//
// In a cluster a claim names the instance whose request holds it, and a
// retry of the same request takes over at once the claim of an instance
// that is gone (its membership ended: killed, or left), instead of being
// told "in progress" until the claim lapses.
func (h *Host) Idempotent(routes ...string) func(http.Handler) http.Handler {
	o := api.IdempotencyOptions{
		Store: h.Idempotency, Routes: routes,
		Retention: h.Config.IdempotencyRetention, InFlight: h.Config.RequestTimeout + idempotencySettle,
	}
	if c := h.parts.Claims; c != nil {
		o.Holder, o.HolderGone = c.ClaimHolder(), c.HolderGone
	}
	return api.Idempotency(o)
}

// Entities is the entities.Host to start key-value entities on, with the
// entities' defaults: a worker pool of their own per type, the default
// passivation and conflict limits; an idempotency key's answer kept as
// long as the ingress keeps it (Config.IdempotencyRetention), a command
// id's for four request timeouts. Change its fields before Start to
// override them.
func (h *Host) Entities() entities.Host {
	return entities.Host{System: h.System, Client: h.Client, Store: h.Store, Cluster: h.parts.Cluster,
		KeyRetention: h.Config.IdempotencyRetention, CommandIDRetention: 4 * h.Config.RequestTimeout}
}

// Setup starts the application's components on the host and mounts its
// routes on r: by hand (r.Get, r.Post, r.Route …) or through the handler
// that oapi-codegen generated from the application's own contract
//
//	contract.HandlerWithOptions(endpoints, contract.ChiServerOptions{
//		BaseRouter: r, ErrorHandlerFunc: api.WriteParamError,
//	})
//
// r is a group of the service's router: the service's middleware (request
// id, access log, metrics by route pattern, timeout, body limit, panics
// and unknown routes as problems, HEAD on GET routes, a query string that
// does not parse refused with 400) covers every route mounted on it, and
// middleware the application adds with r.Use covers only its own routes.
// An error stops New.
type Setup func(h *Host, r chi.Router) error
