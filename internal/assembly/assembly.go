// Package assembly builds a Trellis service out of its parts and runs
// their lifecycle: the ordered list of parts (tracing, the state store,
// the actor system, reliable delivery's drain, the timers, the consumers,
// the views, the cluster, the workflows, HTTP), each with its start, its
// stop and a kill's cut; the wiring between them (which shards the
// consumers serve, what the cluster stops before it hands a shard over,
// the series on /metrics, the admin API); the HTTP server; and the
// durable producers' hand-over to a queue's owner.
//
// The root package trellis is its public face: trellis.New translates its
// Config and options into this package's Config, and trellis.Host shows
// the application what Build made (Host). This package never imports the
// root.
package assembly

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/internal/admin"
	"github.com/trellis-go/trellis/internal/cluster/node"
	"github.com/trellis-go/trellis/internal/faulthook"
	"github.com/trellis-go/trellis/internal/httpserver"
	"github.com/trellis-go/trellis/internal/peer"
)

// Config is what the parts are built from: the service's settings (those
// of trellis.Config, their defaults filled in and checked) and New's
// options.
type Config struct {
	// RedisURL or RedisClusterURL is the state store's Redis (both
	// empty: the embedded in-memory store), RedisPrefix its keys'
	// prefix, and StoreSetting the setting that names it, in the
	// *SettingError of a Redis that refuses it.
	RedisURL, RedisClusterURL, RedisPrefix string
	StoreSetting                           Setting
	// Cluster is the instance's part in a cluster; nil when it is not
	// part of one. ClusterSetting is the variable that sets the
	// cluster's port, which turns the cluster mode on or off.
	Cluster        *ClusterConfig
	ClusterSetting string
	// AdminToken is the admin API's bearer token (empty: no admin API).
	AdminToken string
	// MaxBodyBytes, RequestTimeout and MaxConnections bound the HTTP
	// requests (trellis.Config's fields of the same names).
	MaxBodyBytes   int64
	RequestTimeout time.Duration
	MaxConnections int
	// TimerDeadLetterRetention is how long the timers' dead letters are
	// kept.
	TimerDeadLetterRetention time.Duration

	// Logger is the service's log, before tracing stamps it.
	Logger *slog.Logger
	// Clock is the service's clock; ClockSet says the application gave
	// it (then the timers on Redis follow it too, instead of Redis TIME).
	Clock    clockwork.Clock
	ClockSet bool
	// Contract is the application's OpenAPI document (nil: none).
	Contract []byte
	// Faults are a test kit's fault points; nil in production.
	Faults faulthook.Points
	// TracerProvider replaces the pipeline of the OTEL_* variables; nil:
	// that pipeline (or none). Program is the service's name in its
	// traces.
	TracerProvider trace.TracerProvider
	Program        string
	// Setup is the application's: it starts its components on the host
	// and mounts its routes on r. An error stops Build.
	Setup func(r chi.Router) error
}

// ClusterConfig is the instance's part in a cluster: where its port
// listens and is reached, how its messages are signed and carried, and
// its membership's lease.
type ClusterConfig struct {
	Listen, Advertise string
	Secret            string
	TLS               peer.TLSFiles
	Lease             time.Duration
}

// Setting names a setting by its environment variable and its flag ("":
// none).
type Setting struct{ Var, Flag string }

// SettingError is a setting the parts refuse (a Redis that refuses the
// URL's settings, an OTEL_* variable that does not parse): trellis.New
// reports it as its *ConfigError.
type SettingError struct {
	Setting
	Reason string
}

func (e *SettingError) Error() string { return e.Var + ": " + e.Reason }

// Build builds the service on in, part by part in the order of its list
// (see build), and starts the parts in that order once setup has run.
// When a step fails, or a part does not start, every part built so far is
// stopped again, in the reverse order, and Build returns the error.
func Build(cfg Config, in *Host) (*Service, error) {
	a := &assembly{cfg: cfg, host: in}
	in.Clock, in.Logger, in.Checks, in.Shards = cfg.Clock, cfg.Logger, &httpserver.Checks{}, node.Every
	if cfg.Cluster != nil {
		a.view = node.NewShards()
		in.Shards = a.view
	}
	if err := a.build(); err != nil {
		a.parts.release(cfg.Logger)
		return nil, err
	}
	return a.start()
}

// assembly is what Build's steps build the service with: each step makes
// one part on the host, from the configuration and what the earlier
// steps made, and adds it to the list.
type assembly struct {
	cfg   Config
	host  *Host
	parts parts
	// view is the cluster's membership of the moment; nil when the
	// instance is not part of a cluster.
	view *node.Shards
	// admin is the cluster the admin API reads; nil when the instance is
	// not part of one.
	admin admin.Cluster
	// collectors are the parts' series on /metrics.
	collectors []prometheus.Collector
	// http is the HTTP server, made last.
	http *Server
}

// build runs the steps in order, until one fails. A step adds its part
// once it holds something to stop; a step that fails releases what it
// made itself. The list is the service's: its parts start in this order
// and stop in the reverse one (trellis.Service.Shutdown says why each
// stops where it does).
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

// start starts the parts the steps built: the service then runs.
func (a *assembly) start() (*Service, error) {
	s := &Service{HTTP: a.http, log: a.host.Logger, parts: a.parts}
	if a.cfg.Faults != nil {
		a.cfg.Faults.OnKill(s.kill)
	}
	if err := s.parts.startAll(context.Background()); err != nil {
		s.parts.release(a.cfg.Logger)
		return nil, fmt.Errorf("trellis: %w", err)
	}
	return s, nil
}
