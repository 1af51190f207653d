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

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/admin"
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
	conn    *store.Conn  // the Redis client's connection; nil with the embedded store
	node    *clusterNode // nil when the instance is not part of a cluster

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

// New builds the service: the state store (Redis when cfg.RedisURL is set,
// else the embedded in-memory store), the actor system, the component
// client, the timer scheduler, the HTTP router with the service's own
// routes and the admin API, and the application (setup), which mounts its
// routes. It does not listen yet. On error everything it built is
// released. The zero fields of cfg take their defaults (so Config{} is
// the default configuration); the others must be valid.
func New(cfg Config, setup Setup, opts ...Option) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("trellis: %w", err)
	}
	if setup == nil {
		return nil, errors.New("trellis: the setup function is nil")
	}
	o := newOptions(cfg, opts)
	tr, err := openTracing(o)
	if err != nil {
		return nil, fmt.Errorf("trellis: %w", err)
	}
	o.logger = tr.logger(o.logger)
	h := &Host{Config: cfg, Clock: o.clock, Logger: o.logger, checks: &httpserver.Checks{}, Tracing: tr.provider, tracing: tr}
	conn, err := openStore(h)
	if err != nil {
		_ = tr.shutdown(context.Background())
		return nil, err
	}
	h.System = runtime.NewSystem("trellis", runtime.WithClock(o.clock), runtime.WithLogger(o.logger), runtime.WithTracer(tr.tracer))
	h.Client = components.NewClient(components.NewRegistry(), components.WithTracer(tr.tracer))
	var node *clusterNode
	if cfg.clustered() {
		if node, err = joinCluster(context.Background(), h, cfg, o.faults); err != nil {
			releaseHost(h, conn, nil)
			return nil, fmt.Errorf("trellis: %w", err)
		}
		h.cluster, h.node = node.entities(), node
	}
	if err := openTimers(h, o); err != nil {
		releaseHost(h, conn, node)
		return nil, err
	}
	if err := openConsumers(h, node); err != nil {
		releaseHost(h, conn, node)
		return nil, err
	}
	metrics, err := httpserver.NewMetrics(append(tr.collectors(), h.Timers.Collector(), h.consumers.Collector())...)
	if err != nil {
		releaseHost(h, conn, node)
		return nil, fmt.Errorf("trellis: %w", err)
	}
	h.Metrics = metrics.Registry
	if node != nil {
		for _, c := range node.collectors() {
			if err := h.Metrics.Register(c); err != nil {
				releaseHost(h, conn, node)
				return nil, fmt.Errorf("trellis: cluster metrics: %w", err)
			}
		}
		// Unready until a member: the first of the checks, before the
		// application's own.
		if err := h.checks.Add("the cluster membership", node.ready); err != nil {
			releaseHost(h, conn, node)
			return nil, fmt.Errorf("trellis: %w", err)
		}
	}

	router := httpserver.New(httpserver.Options{
		Logger:         o.logger,
		MaxBodyBytes:   cfg.MaxBodyBytes,
		LargeBodies:    map[string]int64{admin.ImportPath: max(admin.MaxImportBytes, cfg.MaxBodyBytes)},
		RequestTimeout: cfg.RequestTimeout,
		Metrics:        metrics,
		Readiness:      httpserver.Readiness{Store: h.Store, Timers: h.Timers, Checks: h.checks},
		Contract:       o.contract,
		Tracing:        tr.httpProvider(),
	})
	admin.Register(router, admin.Options{Token: cfg.AdminToken, Timers: h.Timers, Store: h.Store, Clock: h.Clock,
		Cluster: node.admin(), Consumers: h.consumers})
	router.Group(func(r chi.Router) {
		r.Use(httpserver.CheckQuery)
		err = setup(h, r)
	})
	if err != nil {
		releaseHost(h, conn, node)
		return nil, fmt.Errorf("trellis: setup: %w", err)
	}
	s := &Service{cfg: cfg, log: o.logger, host: h, handler: router, metrics: metrics, conn: conn, node: node}
	if o.faults != nil {
		o.faults.OnKill(s.kill)
	}
	h.consumers.Start(context.Background())
	node.start() // every entity type and consumer is started: shards may come
	h.Timers.StartRetrying(timerRetry)
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		// A handler that overruns its request timeout still ends its
		// connection a little later.
		WriteTimeout: cfg.RequestTimeout + 5*time.Second,
		IdleTimeout:  idleTimeout,
		ErrorLog:     slog.NewLogLogger(o.logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// timerRetry is how long the service waits between attempts to start the
// timer scheduler when its store cannot be reached.
const timerRetry = time.Second

// openStore makes h's store, and its Redis client when there is one. A
// Redis that refuses the URL's settings is a *ConfigError naming the
// variable: the service does not start. A Redis that does not answer yet
// is only logged: the service starts unready, and /readyz says why until
// Redis answers.
func openStore(h *Host) (*store.Conn, error) {
	env, flag := EnvRedisURL, "-redis-url"
	if h.Config.RedisClusterURL != "" {
		env, flag = EnvRedisClusterURL, "-redis-cluster-url"
	}
	conn, err := store.Open(h.Config.RedisURL, h.Config.RedisClusterURL, h.Logger)
	if err != nil { // Validate checked the URL; this is belt and braces
		return nil, fmt.Errorf("trellis: %w", &ConfigError{Var: env, Reason: err.Error()})
	}
	if conn == nil {
		h.Store = entities.NewMemoryStore()
		h.Idempotency = idempotency.NewMemoryStore(h.Clock)
		h.Logger.Warn("TRELLIS_REDIS_URL is not set: using the embedded in-memory store, which is NOT durable; " +
			"all state is lost when the process stops. Set TRELLIS_REDIS_URL (or TRELLIS_REDIS_CLUSTER_URL) to keep it in Redis.")
		return nil, nil
	}
	var refused *store.RefusedError
	switch err := store.Check(context.Background(), conn.Client); {
	case errors.As(err, &refused):
		_ = conn.Close()
		return nil, fmt.Errorf("trellis: %w", &ConfigError{Var: env, Flag: flag, Reason: refused.Error()})
	case err != nil:
		h.Logger.Warn("the state store's Redis does not answer yet: starting unready; /readyz says why until it does",
			"err", store.Redact(err, h.Config.RedisURL, h.Config.RedisClusterURL))
	}
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
	return conn, nil
}

// openTimers makes h's timer scheduler on the same store as the entities.
func openTimers(h *Host, o options) error {
	var store timers.Store
	if h.Redis != nil {
		var ropts []timers.RedisOption
		if o.clockSet {
			ropts = append(ropts, timers.WithRedisClock(o.clock))
		}
		store = timers.NewRedisStore(h.Redis, h.Config.RedisPrefix, ropts...)
	} else {
		store = timers.NewMemoryStore(o.clock)
	}
	sched, err := timers.New(store, h.Client, timers.Config{Logger: h.Logger, DeadLetterRetention: h.Config.TimerDeadLetterRetention})
	if err != nil {
		return fmt.Errorf("trellis: timer scheduler: %w", err)
	}
	h.Timers = sched
	return nil
}

// openConsumers makes h's consumer runner over the store's change log:
// the embedded store's, or the sharded store's in the cluster mode; the
// per-instance Redis store keeps none, and Consumer.Start then fails.
func openConsumers(h *Host, node *clusterNode) error {
	cfg := consumers.Config{Client: h.Client, Clock: h.Clock, Logger: h.Logger,
		DeadLetters: consumers.NewMemoryDeadLetters()}
	if log, ok := h.Store.(entities.ChangeLog); ok {
		cfg.Log = log
	} else {
		cfg.NoLog = "consumers need the cluster mode on Redis (set " + EnvClusterAddr + "), or the embedded store: " +
			"a Redis store without it keeps no change log"
	}
	if h.Redis != nil {
		cfg.DeadLetters = consumers.NewRedisDeadLetters(h.Redis, h.Config.RedisPrefix)
	}
	if node != nil {
		cfg.Shards = node
		node.consumers = func() *consumers.Runner { return h.consumers }
	}
	r, err := consumers.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("trellis: consumers: %w", err)
	}
	h.consumers = r
	return nil
}

// releaseHost stops what New started, when New fails.
func releaseHost(h *Host, conn *store.Conn, node *clusterNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h.consumers != nil {
		_ = h.consumers.Stop(ctx)
	}
	_ = h.workflows.Stop(ctx)
	if node != nil {
		node.abort()
	}
	if h.Timers != nil {
		_ = h.Timers.Shutdown(ctx)
	}
	if h.System != nil {
		_ = h.System.Shutdown(ctx)
	}
	if conn != nil {
		_ = conn.Close()
	}
	_ = h.tracing.shutdown(ctx)
}

// Host is what the application was set up on.
func (s *Service) Host() *Host { return s.host }

// ShardsServed is how many of the cluster's shards this instance serves
// now: 0 when it is not part of a cluster, all of them when it is alone.
func (s *Service) ShardsServed() int { return s.node.served() }

// Serves reports whether this instance runs the commands of the entity
// (componentID, entityID) now, rather than forwarding them to its
// shard's owner: always when it is not part of a cluster.
func (s *Service) Serves(componentID, entityID string) bool {
	if s.node == nil {
		return true
	}
	_, ok := s.node.Fence(componentID, entityID)
	return ok
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

// Shutdown stops the service gracefully, in this order:
//
//  1. HTTP: stop accepting connections and wait for the requests in flight
//     to finish (http.Server.Shutdown). When ctx ends first, the remaining
//     connections are closed.
//  2. The timer scheduler: it stops claiming timers and finishes (or
//     releases to another instance) the calls in flight, which still reach
//     their components.
//  3. The consumers: each finishes the handler in flight and saves its
//     checkpoint; the changes they have not handled are handled by the
//     shards' next owners (or by this instance when it starts again).
//     This comes before the cluster hands the shards over, so that no
//     handler runs on a shard this instance no longer serves.
//  4. The cluster, when the instance is part of one: its shards are handed
//     over to the other instances one at a time, each once its commands
//     in flight have finished (commands forwarded here meanwhile still
//     run, or wait for the new owner), then the membership ends and the
//     transport stops.
//  5. Reliable delivery is drained (delivery.Drain): what consumers
//     confirmed is stored in the durable producer queues, so that a
//     restart sends none of it again.
//  6. The actor system: every entity and timed action stops (entities
//     passivate: their state is already stored, since every command writes
//     before it replies). This comes after HTTP and the cluster, so that
//     the requests that were allowed to finish could still reach their
//     entities.
//  7. Tracing: the spans still queued are exported, within a few
//     seconds of their own (an unreachable collector loses them).
//  8. Redis: closed last, once nothing can use it.
//
// ctx bounds steps 1 to 6. Shutdown may be called more than once; each
// call returns the first call's result.
func (s *Service) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Service) shutdown(ctx context.Context) error {
	var errs []error
	s.log.Info("shutting down: draining HTTP requests")
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
	// Timers next: a timer's call reaches entities and timed actions, so the
	// calls in flight finish (or are released for another instance) while
	// those can still answer.
	s.log.Info("shutting down: stopping the timer scheduler")
	if err := s.host.Timers.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop the timer scheduler: %w", err))
	}
	s.log.Info("shutting down: stopping the consumers")
	if err := s.host.consumers.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("shutting down: stopping the workflows' runners")
	if err := s.host.workflows.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if s.node != nil {
		// A Redis out of reach cannot take the shards back: the others
		// take them when this member's lease lapses, as after a kill.
		switch err := s.node.leave(ctx); {
		case store.Unavailable(err):
			s.log.Warn("shutting down: could not hand the shards over, Redis does not answer: the other instances serve them once this one's lease lapses",
				"err", store.Redact(err, s.host.Config.RedisURL, s.host.Config.RedisClusterURL))
		case err != nil:
			errs = append(errs, err)
		}
		if err := s.node.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop the cluster transport: %w", err))
		}
	}
	s.log.Info("shutting down: draining reliable delivery")
	if err := delivery.Drain(ctx, s.host.System); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("shutting down: stopping entities")
	if err := s.host.System.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop the actor system: %w", err))
	}
	if err := s.host.tracing.shutdown(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, err)
	}
	if s.conn != nil {
		if err := s.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close Redis: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("trellis: shutdown: %w", err)
	}
	s.log.Info("stopped")
	return nil
}
