package trellis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/admin"
	"github.com/trellis-go/trellis/internal/cluster/node"
	"github.com/trellis-go/trellis/internal/httpserver"
	"github.com/trellis-go/trellis/internal/idempotency"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/timers"
)

// Service is the assembled service: build it with New, serve with Start or
// Serve, and stop it with Shutdown.
type Service struct {
	cfg     Config
	log     *slog.Logger
	host    *Host
	handler http.Handler
	metrics *httpserver.Metrics
	srv     *http.Server
	parts   parts         // what New built, in the order it starts
	shards  node.ShardSet // the shards this instance serves

	mu      sync.Mutex
	ln      net.Listener  // set by Start or Serve
	done    chan struct{} // closed when the Serve started by Start returns
	serveMu sync.Mutex
	served  error // what that Serve returned

	shutdownOnce sync.Once
	shutdownErr  error
}

// readHeaderTimeout bounds how long a client may take to send the request
// headers (slowloris); idleTimeout how long a keep-alive connection waits
// for its next request.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// New builds the service, part by part in the order of its list
// (newService's steps): tracing, the state store (Redis when cfg.RedisURL
// is set, else the embedded in-memory store), the actor system and the
// component client, reliable delivery's drain, the consumers, the
// cluster (when the instance is part of one), the timer scheduler, and
// the HTTP server with the service's own routes, the admin API and the
// application (setup), which mounts its routes. It does not listen yet.
// On error every part it built is stopped again, in the reverse order.
// The zero fields of cfg take their defaults (so Config{} is the default
// configuration); the others must be valid.
func New(cfg Config, setup Setup, opts ...Option) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("trellis: %w", err)
	}
	if setup == nil {
		return nil, errors.New("trellis: the setup function is nil")
	}
	o := newOptions(cfg, opts)
	s := &Service{cfg: cfg, log: o.logger}
	a := &assembly{cfg: cfg, o: o, svc: s, setup: setup, shards: node.Every}
	if cfg.clustered() {
		a.view = node.NewShards()
		a.shards = a.view
	}
	if err := a.build(); err != nil {
		a.parts.release(o.logger)
		return nil, err
	}
	s.log, s.host, s.parts, s.shards = a.o.logger, a.host, a.parts, a.shards
	if o.faults != nil {
		o.faults.OnKill(s.kill)
	}
	if err := s.parts.startAll(context.Background()); err != nil {
		s.parts.release(o.logger)
		return nil, fmt.Errorf("trellis: %w", err)
	}
	return s, nil
}

// assembly is what New's steps build the service with: each step makes
// one part on the host, from the configuration and what the earlier
// steps made, and adds it to the list.
type assembly struct {
	cfg   Config
	o     options
	svc   *Service
	setup Setup
	host  *Host
	tr    serviceTracing
	parts parts
	// shards are the shards this instance serves: every one, or those of
	// its membership of the moment in a cluster.
	shards node.ShardSet
	// view is the cluster's membership of the moment; nil when the
	// instance is not part of a cluster.
	view *node.Shards
	// admin is the cluster the admin API reads; nil when the instance is
	// not part of one.
	admin admin.Cluster
	// collectors are the parts' series on /metrics.
	collectors []prometheus.Collector
}

// build runs New's steps in order, until one fails. A step adds its part
// once it holds something to stop; a step that fails releases what it
// made itself.
func (a *assembly) build() error {
	for _, step := range []func(*assembly) error{
		openTracing,
		openStore,
		newActorSystem,
		drainDelivery,
		newTimers,
		openConsumers,
		openViews,
		joinCluster,
		runWorkflows,
		sweepJournals,
		startTimers,
		serveHTTP,
	} {
		if err := step(a); err != nil {
			return err
		}
	}
	return nil
}

// add appends p to the service's list.
func (a *assembly) add(p part) { a.parts = append(a.parts, p) }

// release stops the parts of a service that did not start, bounded by
// releaseTimeout.
func (ps parts) release(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = ps.stopAll(ctx, log)
}

// releaseTimeout bounds the release of a service that did not start.
const releaseTimeout = 10 * time.Second

// openTracing makes the service's tracing and its host, whose logger
// stamps the lines written inside a span. The spans still queued are
// exported when the service stops, within a few seconds of their own (an
// unreachable collector loses them); a kill loses them.
func openTracing(a *assembly) error {
	tr, err := newTracing(a.o)
	if err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	a.tr = tr
	a.o.logger = tr.logger(a.o.logger)
	a.host = &Host{Config: a.cfg, Clock: a.o.clock, Logger: a.o.logger, checks: &httpserver.Checks{}, Tracing: tr.provider, tracing: tr, shards: a.shards}
	a.add(part{name: "tracing", farewell: true, stop: func(ctx context.Context) error {
		return tr.shutdown(context.WithoutCancel(ctx))
	}})
	return nil
}

// newActorSystem makes the host's actor system and component client.
func newActorSystem(a *assembly) error {
	h := a.host
	h.System = runtime.NewSystem("trellis", runtime.WithClock(a.o.clock), runtime.WithLogger(a.o.logger), runtime.WithTracer(a.tr.tracer))
	h.Client = components.NewClient(components.NewRegistry(), components.WithTracer(a.tr.tracer))
	a.add(part{name: "entities", stop: func(ctx context.Context) error {
		return h.System.Shutdown(ctx)
	}})
	return nil
}

// drainDelivery stores, at shutdown, what consumers confirmed in the
// durable producer queues (delivery.Drain), so that a restart sends none
// of it again: after the cluster stops, before the actor system does.
func drainDelivery(a *assembly) error {
	sys := a.host.System
	a.add(part{name: "reliable delivery", farewell: true, stop: func(ctx context.Context) error {
		return delivery.Drain(ctx, sys)
	}})
	return nil
}

// serveHTTP makes the service's metrics, router and admin API, runs the
// application's setup on them, and the HTTP server that Start and Serve
// run.
func serveHTTP(a *assembly) error {
	h, cfg, s := a.host, a.cfg, a.svc
	metrics, err := httpserver.NewMetrics(append(a.tr.collectors(), a.collectors...)...)
	if err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	h.Metrics = metrics.Registry
	router := httpserver.New(httpserver.Options{
		Logger:         a.o.logger,
		MaxBodyBytes:   cfg.MaxBodyBytes,
		LargeBodies:    map[string]int64{admin.ImportPath: max(admin.MaxImportBytes, cfg.MaxBodyBytes)},
		RequestTimeout: cfg.RequestTimeout,
		Metrics:        metrics,
		Readiness:      httpserver.Readiness{Store: h.Store, Timers: h.Timers, Checks: h.checks},
		Contract:       a.o.contract,
		Tracing:        a.tr.httpProvider(),
	})
	admin.Register(router, admin.Options{Token: cfg.AdminToken, Timers: h.Timers, Store: h.Store, Clock: h.Clock,
		Cluster: a.admin, Consumers: h.consumers, Views: h.views, Registry: h.Client.Registry(), Workflows: &h.workflows})
	enforce, err := contractMiddleware(a.o.contract)
	if err != nil {
		return err
	}
	router.Group(func(r chi.Router) {
		r.Use(httpserver.CheckQuery)
		r.Use(enforce...)
		err = a.setup(h, r)
	})
	if err != nil {
		return fmt.Errorf("trellis: setup: %w", err)
	}
	s.handler, s.metrics = router, metrics
	s.srv = &http.Server{
		Handler:           router,
		ReadHeaderTimeout: readHeaderTimeout,
		// A handler that overruns its request timeout still ends its
		// connection a little later.
		WriteTimeout: cfg.RequestTimeout + 5*time.Second,
		IdleTimeout:  idleTimeout,
		ErrorLog:     slog.NewLogLogger(a.o.logger.Handler(), slog.LevelWarn),
	}
	a.add(part{name: "HTTP requests", stop: s.stopHTTP, cut: s.cutHTTP})
	return nil
}

// timerRetry is how long the service waits between attempts to start the
// timer scheduler when its store cannot be reached.
const timerRetry = time.Second

// openStore makes h's store, and its Redis client when there is one. A
// Redis that refuses the URL's settings is a *ConfigError naming the
// variable: the service does not start. A Redis that does not answer yet
// is only logged: the service starts unready, and /readyz says why until
// Redis answers.
func openStore(a *assembly) error {
	h := a.host
	env, flag := EnvRedisURL, "-redis-url"
	if h.Config.RedisClusterURL != "" {
		env, flag = EnvRedisClusterURL, "-redis-cluster-url"
	}
	conn, err := store.Open(h.Config.RedisURL, h.Config.RedisClusterURL, h.Logger)
	if err != nil { // Validate checked the URL; this is belt and braces
		return fmt.Errorf("trellis: %w", &ConfigError{Var: env, Reason: err.Error()})
	}
	if conn == nil {
		h.Store = entities.NewMemoryStore()
		h.Idempotency = idempotency.NewMemoryStore(h.Clock)
		h.Logger.Warn("TRELLIS_REDIS_URL is not set: using the embedded in-memory store, which is NOT durable; " +
			"all state is lost when the process stops. Set TRELLIS_REDIS_URL (or TRELLIS_REDIS_CLUSTER_URL) to keep it in Redis.")
		return nil
	}
	var refused *store.RefusedError
	switch err := store.Check(context.Background(), conn.Client); {
	case errors.As(err, &refused):
		_ = conn.Close()
		return fmt.Errorf("trellis: %w", &ConfigError{Var: env, Flag: flag, Reason: refused.Error()})
	case err != nil:
		h.Logger.Warn("the state store's Redis does not answer yet: starting unready; /readyz says why until it does",
			"err", store.Redact(err, h.Config.RedisURL, h.Config.RedisClusterURL))
	}
	// Closed last, once nothing can use it; a kill closes it at once, so
	// that nothing is told to Redis any more.
	a.add(part{name: "Redis", stop: func(context.Context) error { return conn.Close() }, cut: func() { _ = conn.Close() }})
	h.Redis = conn.Client
	h.Idempotency = idempotency.NewRedisStore(h.Redis, h.Config.RedisPrefix)
	if h.Config.clustered() {
		// One owner per entity: writes are fenced by the shard's epoch,
		// and the state shares its shard record's slot.
		h.Store = entities.NewShardedRedisStore(h.Redis, h.Config.RedisPrefix)
	} else {
		h.Store = entities.NewRedisStore(h.Redis, h.Config.RedisPrefix)
	}
	h.Logger.Info("state store: Redis", append(conn.Desc, "prefix", h.Config.RedisPrefix)...)
	return nil
}

// newTimers makes h's timer scheduler on the same store as the entities,
// early: the consumers' handlers get it (consumers.Ctx.Timers). It runs as
// a part of its own (startTimers).
func newTimers(a *assembly) error {
	h := a.host
	var store timers.Store
	if h.Redis != nil {
		var ropts []timers.RedisOption
		if a.o.clockSet {
			ropts = append(ropts, timers.WithRedisClock(a.o.clock))
		}
		store = timers.NewRedisStore(h.Redis, h.Config.RedisPrefix, ropts...)
	} else {
		store = timers.NewMemoryStore(a.o.clock)
	}
	sched, err := timers.New(store, h.Client, timers.Config{Logger: h.Logger, DeadLetterRetention: h.Config.TimerDeadLetterRetention})
	if err != nil {
		return fmt.Errorf("trellis: timer scheduler: %w", err)
	}
	h.Timers = sched
	a.collectors = append(a.collectors, sched.Collector())
	return nil
}

// startTimers adds the timer scheduler to the list: it fires once every
// other part has started, and stops first after HTTP: a timer's call
// reaches entities and timed actions, so the calls in flight finish (or
// are released for another instance) while those can still answer.
func startTimers(a *assembly) error {
	sched := a.host.Timers
	a.add(part{name: "the timer scheduler",
		start: func(context.Context) error { sched.StartRetrying(timerRetry); return nil },
		stop:  sched.Shutdown})
	return nil
}

// openConsumers makes h's consumer runner over the store's change log:
// the embedded store's, or the sharded store's in the cluster mode; the
// per-instance Redis store keeps none, and Consumer.Start then fails.
// Each consumes the shards this instance serves. They stop before the
// cluster hands the shards over: each finishes the handler in flight and
// saves its checkpoint, and the changes not handled yet are handled by
// the shards' next owners.
func openConsumers(a *assembly) error {
	h := a.host
	cfg := consumers.Config{Client: h.Client, Timers: h.Timers, Clock: h.Clock, Logger: h.Logger,
		DeadLetters: consumers.NewMemoryDeadLetters(), Shards: a.shards}
	cfg.Log, cfg.NoLog = changeLog(h, "consumers")
	if h.Redis != nil {
		cfg.DeadLetters = consumers.NewRedisDeadLetters(h.Redis, h.Config.RedisPrefix)
	}
	r, err := consumers.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("trellis: consumers: %w", err)
	}
	h.consumers = r
	a.collectors = append(a.collectors, r.Collector())
	a.add(part{name: "the consumers",
		start: func(ctx context.Context) error { r.Start(ctx); return nil },
		stop:  r.Stop})
	return nil
}

// changeLog is the store's change log, which consumers and views read:
// the embedded store's, or the sharded store's in the cluster mode. The
// per-instance Redis store keeps none: then it is nil, and the reason
// says why what (consumers, views) cannot start.
func changeLog(h *Host, what string) (log entities.ChangeLog, reason string) {
	if log, ok := h.Store.(entities.ChangeLog); ok {
		return log, ""
	}
	return nil, what + " need the cluster mode on Redis (set " + EnvClusterAddr + "), or the embedded store: " +
		"a Redis store without it keeps no change log"
}

// Host is what the application was set up on.
func (s *Service) Host() *Host { return s.host }

// ShardsServed is how many of the cluster's shards this instance serves
// now: 0 when it is not part of a cluster, all of them when it is alone.
func (s *Service) ShardsServed() int { return s.shards.Served() }

// Serves reports whether this instance runs the commands of the entity
// (componentID, entityID) now, rather than forwarding them to its
// shard's owner: always when it is not part of a cluster.
func (s *Service) Serves(componentID, entityID string) bool {
	return s.shards.Serves(componentID, entityID)
}

// Handler is the service's HTTP handler, with all its middleware.
func (s *Service) Handler() http.Handler { return s.handler }

// Logger is the service's logger.
func (s *Service) Logger() *slog.Logger { return s.log }

// Start listens on Config.HTTPAddr (ctx bounds only the listen) and serves
// in the background until Shutdown. Done is closed when serving ends.
func (s *Service) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("trellis: listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	s.setListener(ln) // so that Addr answers as soon as Start returns
	done := make(chan struct{})
	s.mu.Lock()
	s.done = done
	s.mu.Unlock()
	go func() {
		defer close(done)
		err := s.Serve(ln)
		s.serveMu.Lock()
		s.served = err
		s.serveMu.Unlock()
		if err != nil {
			s.log.Error("HTTP server stopped", "err", err)
		}
	}()
	return nil
}

// Serve serves HTTP on ln until Shutdown, then returns nil; any other end
// is an error. It takes ownership of ln, and keeps at most
// Config.MaxConnections connections open on it.
func (s *Service) Serve(ln net.Listener) error {
	s.setListener(ln)
	s.log.Info("listening", "addr", ln.Addr().String())
	// Errors net/http answers by itself become problems too.
	err := s.srv.Serve(httpserver.ProblemResponses(s.metrics.LimitConnections(ln, s.cfg.MaxConnections)))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("trellis: serve HTTP: %w", err)
}

func (s *Service) setListener(ln net.Listener) {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
}

// Addr is the address the service listens on (nil before Start or Serve).
func (s *Service) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Done is closed when the serving that Start began has ended: after
// Shutdown, or on a failure (then Shutdown returns it). It is nil before
// Start.
func (s *Service) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Shutdown stops the service gracefully, its parts in the reverse order
// of New's list:
//
//  1. HTTP: stop accepting connections and wait for the requests in flight
//     to finish (http.Server.Shutdown). When ctx ends first, the remaining
//     connections are closed.
//  2. The timer scheduler: it stops claiming timers and finishes (or
//     releases to another instance) the calls in flight, which still reach
//     their components.
//  3. The cluster, when the instance is part of one: its shards are handed
//     over to the other instances one at a time, each once its consumers
//     have finished the handler in flight and saved their checkpoints and
//     its commands in flight have finished (commands forwarded here
//     meanwhile still run, or wait for the new owner); then the
//     membership ends and the transport stops.
//  4. The consumers: each finishes the handler in flight and saves its
//     checkpoint; the changes they have not handled are handled by the
//     shards' next owners (or by this instance when it starts again).
//  5. Reliable delivery is drained (delivery.Drain): what consumers
//     confirmed is stored in the durable producer queues, so that a
//     restart sends none of it again.
//  6. The actor system: every entity and timed action stops (entities
//     passivate: their state is already stored, since every command writes
//     before it replies). This comes after HTTP and the cluster, so that
//     the requests that were allowed to finish could still reach their
//     entities.
//  7. Redis: closed once nothing can use it.
//  8. Tracing: the spans still queued are exported, within a few
//     seconds of their own (an unreachable collector loses them).
//
// ctx bounds steps 1 to 6. Shutdown may be called more than once; each
// call returns the first call's result.
func (s *Service) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Service) shutdown(ctx context.Context) error {
	if err := s.parts.stopAll(ctx, s.log); err != nil {
		return fmt.Errorf("trellis: shutdown: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

// stopHTTP stops accepting connections and waits for the requests in
// flight, within ctx (then it closes the connections left), and for
// Serve to return.
func (s *Service) stopHTTP(ctx context.Context) error {
	var errs []error
	if err := s.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("drain HTTP: %w", err))
		_ = s.srv.Close()
	}
	if done := s.Done(); done != nil {
		select {
		case <-done:
			s.serveMu.Lock()
			if s.served != nil {
				errs = append(errs, s.served)
			}
			s.serveMu.Unlock()
		case <-ctx.Done():
		}
	}
	return errors.Join(errs...)
}

// cutHTTP closes the listener and every connection at once, requests in
// flight included, and waits for Serve to return.
func (s *Service) cutHTTP() {
	_ = s.srv.Close()
	if done := s.Done(); done != nil {
		<-done
	}
}
