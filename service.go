package trellis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/internal/assembly"
)

// Service is the assembled service: build it with New, serve with Start or
// Serve, and stop it with Shutdown.
type Service struct {
	cfg  Config
	host *Host
	run  *assembly.Service // its parts, in the order they start, and its HTTP server
}

// New builds the service, part by part in the order of the service's
// list: tracing, the state store (Redis when cfg.RedisURL is set, else
// the embedded in-memory store), the actor system and the component
// client, reliable delivery's drain, the timer scheduler, the consumers,
// the views, the cluster (when the instance is part of one), the
// workflows' runners, and the HTTP server with the service's own routes,
// the admin API and the application (setup), which mounts its routes;
// then it starts them in that order. It does not listen yet. On error
// every part it built is stopped again, in the reverse order. The zero
// fields of cfg take their defaults (so Config{} is the default
// configuration); the others must be valid.
func New(cfg Config, setup Setup, opts ...Option) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("trellis: %w", err)
	}
	if setup == nil {
		return nil, errors.New("trellis: the setup function is nil")
	}
	h := &Host{Config: cfg}
	run, err := assembly.Build(assemblyConfig(cfg, newOptions(cfg, opts), func(r chi.Router) error {
		h.show()
		return setup(h, r)
	}), &h.parts)
	var bad *assembly.SettingError
	if errors.As(err, &bad) {
		return nil, fmt.Errorf("trellis: %w", &ConfigError{Var: bad.Var, Flag: bad.Flag, Reason: bad.Reason})
	}
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, host: h, run: run}, nil
}

// assemblyConfig is what the service's parts are built from: cfg's settings and
// o's options, with setup, the application's.
func assemblyConfig(cfg Config, o options, setup func(chi.Router) error) assembly.Config {
	c := assembly.Config{
		RedisURL: cfg.RedisURL, RedisClusterURL: cfg.RedisClusterURL, RedisPrefix: cfg.RedisPrefix,
		StoreSetting: assembly.Setting{Var: EnvRedisURL, Flag: "-redis-url"}, ClusterSetting: EnvClusterAddr,
		AdminToken: cfg.AdminToken, MaxBodyBytes: cfg.MaxBodyBytes, RequestTimeout: cfg.RequestTimeout,
		MaxConnections: cfg.MaxConnections, TimerDeadLetterRetention: cfg.TimerDeadLetterRetention,
		Logger: o.logger, Clock: o.clock, ClockSet: o.clockSet, Contract: o.contract, Faults: o.faults,
		TracerProvider: o.tracerProvider, Program: programName(), Setup: setup,
	}
	if cfg.RedisClusterURL != "" {
		c.StoreSetting = assembly.Setting{Var: EnvRedisClusterURL, Flag: "-redis-cluster-url"}
	}
	if cfg.clustered() {
		c.Cluster = &assembly.ClusterConfig{Listen: cfg.clusterListenAddr(), Advertise: cfg.ClusterAdvertiseAddr,
			Secret: cfg.ClusterSecret, TLS: cfg.clusterTLS(), Lease: cfg.ClusterLease}
	}
	return c
}

// Host is what the application was set up on.
func (s *Service) Host() *Host { return s.host }

// ShardsServed is how many of the cluster's shards this instance serves
// now: 0 when it is not part of a cluster, all of them when it is alone.
func (s *Service) ShardsServed() int { return s.host.parts.Shards.Served() }

// Serves reports whether this instance runs the commands of the entity
// (componentID, entityID) now, rather than forwarding them to its
// shard's owner: always when it is not part of a cluster.
func (s *Service) Serves(componentID, entityID string) bool {
	return s.host.parts.Shards.Serves(componentID, entityID)
}

// Handler is the service's HTTP handler, with all its middleware.
func (s *Service) Handler() http.Handler { return s.run.HTTP.Handler() }

// Logger is the service's logger.
func (s *Service) Logger() *slog.Logger { return s.host.parts.Logger }

// Start listens on Config.HTTPAddr (ctx bounds only the listen) and serves
// in the background until Shutdown. Done is closed when serving ends.
func (s *Service) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("trellis: listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	s.run.HTTP.Start(ln)
	return nil
}

// Serve serves HTTP on ln until Shutdown, then returns nil; any other end
// is an error. It takes ownership of ln, and keeps at most
// Config.MaxConnections connections open on it.
func (s *Service) Serve(ln net.Listener) error { return s.run.HTTP.Serve(ln) }

// Addr is the address the service listens on (nil before Start or Serve).
func (s *Service) Addr() net.Addr { return s.run.HTTP.Addr() }

// Done is closed when the serving that Start began has ended: after
// Shutdown, or on a failure (then Shutdown returns it). It is nil before
// Start.
func (s *Service) Done() <-chan struct{} { return s.run.HTTP.Done() }

// Shutdown stops the service gracefully, its parts in the reverse order
// of New's list:
//
//  1. HTTP: stop accepting connections and wait for the requests in flight
//     to finish (http.Server.Shutdown). When ctx ends first, the remaining
//     connections are closed.
//  2. The timer scheduler: it stops claiming timers and finishes (or
//     releases to another instance) the calls in flight, which still reach
//     their components.
//  3. The journals' retention sweep and the workflows' runners: a sweep
//     in flight ends, and each workflow finishes its step in flight or
//     leaves it uncommitted, for the shard's next owner (or this instance
//     when it starts again) to run again.
//  4. The cluster, when the instance is part of one: its shards are handed
//     over to the other instances one at a time, each once its consumers
//     have finished the handler in flight and saved their checkpoints and
//     its commands in flight have finished (commands forwarded here
//     meanwhile still run, or wait for the new owner); then the
//     membership ends and the transport stops.
//  5. The consumers and the views: each finishes the handler in flight
//     and saves its checkpoint; the changes they have not handled are
//     handled by the shards' next owners (or by this instance when it
//     starts again).
//  6. Reliable delivery is drained (delivery.Drain): what consumers
//     confirmed is stored in the durable producer queues, so that a
//     restart sends none of it again.
//  7. The actor system: every entity and timed action stops (entities
//     passivate: their state is already stored, since every command writes
//     before it replies). This comes after HTTP and the cluster, so that
//     the requests that were allowed to finish could still reach their
//     entities.
//  8. Redis: closed once nothing can use it.
//  9. Tracing: the spans still queued are exported, within a few
//     seconds of their own (an unreachable collector loses them).
//
// ctx bounds steps 1 to 7. Shutdown may be called more than once; each
// call returns the first call's result.
func (s *Service) Shutdown(ctx context.Context) error { return s.run.Shutdown(ctx) }
