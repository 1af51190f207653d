package trellis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/clusterhost"
	"github.com/trellis-go/trellis/internal/peer"
)

// clusterNode is this instance's part in a cluster (Config.ClusterAddr
// set): the transport the other instances reach it by, its membership in
// Redis, and the entity layer's side (clusterhost), whose rebalancer moves
// shards to this instance and away.
//
// It starts in New, before the application's setup: the transport first
// (a forwarded command that comes early finds its shard not served here
// and is answered "moved"), then the membership. The rebalancer starts in
// New after setup, once every entity type is started, so no shard is
// taken before its entities could run. It stops in Shutdown: see
// Service.Shutdown for the order.
type clusterNode struct {
	log    *slog.Logger
	server *peer.Server
	peers  *peer.Client
	member *cluster.Member
	host   *clusterhost.Host
	ready  atomic.Pointer[clusterhost.Host] // host, once the transport may hand it calls
}

// handle runs a call another instance forwarded here.
func (n *clusterNode) handle(ctx context.Context, c peer.Call) (peer.Reply, error) {
	h := n.ready.Load()
	if h == nil {
		return peer.Reply{}, peer.NewError(peer.KindMoved, "starting", "this instance is still joining the cluster")
	}
	return h.Handle(ctx, c)
}

// joinCluster starts the transport on cfg.ClusterAddr and joins the
// cluster of the instances that share h's Redis and prefix. A listen
// address with port 0 advertises the port it got.
func joinCluster(ctx context.Context, h *Host, cfg Config) (_ *clusterNode, err error) {
	n := &clusterNode{log: h.Logger.With("component", "cluster")}
	defer func() {
		if err != nil {
			n.abort()
		}
	}()
	n.peers, err = peer.NewClient(peer.ClientConfig{Secret: []byte(cfg.ClusterSecret), Logger: n.log})
	if err != nil {
		return nil, fmt.Errorf("cluster transport: %w", err)
	}
	// The server listens before the host exists (the membership needs the
	// port it got): until then a forwarded command is answered "moved",
	// and its sender routes it again.
	n.server, err = peer.NewServer(peer.ServerConfig{Secret: []byte(cfg.ClusterSecret), Handler: n.handle, Logger: n.log})
	if err != nil {
		return nil, fmt.Errorf("cluster transport: %w", err)
	}
	if err := n.server.Start(cfg.ClusterAddr); err != nil {
		return nil, fmt.Errorf("cluster transport: listen on %s: %w", cfg.ClusterAddr, err)
	}
	advertise, err := advertised(cfg, n.server.Addr())
	if err != nil {
		return nil, err
	}
	n.member, err = cluster.Join(ctx, cluster.Config{
		Client: h.Redis, Prefix: cfg.RedisPrefix, ID: uuid.NewString(), Addr: advertise,
		Lease: cfg.ClusterLease, Logger: n.log,
	})
	if err != nil {
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	n.host, err = clusterhost.New(clusterhost.Config{Member: n.member, Peers: n.peers, Registry: h.Client.Registry(), Logger: n.log})
	if err != nil {
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	n.ready.Store(n.host)
	n.log.Info("joined the cluster", "member", n.member.ID(), "addr", advertise, "lease", cfg.ClusterLease.String())
	return n, nil
}

// advertised is the address the other instances dial: the advertise
// address, else the listen address, with the port the listener got when
// the configured one is 0.
func advertised(cfg Config, bound string) (string, error) {
	addr := cfg.ClusterAdvertiseAddr
	if addr == "" {
		addr = cfg.ClusterAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("cluster advertise address %q: %w", addr, err)
	}
	if port == "0" {
		if _, port, err = net.SplitHostPort(bound); err != nil {
			return "", fmt.Errorf("cluster listen address %q: %w", bound, err)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// entities is the cluster the entity layer routes through; nil when the
// instance is not part of one.
func (n *clusterNode) entities() entities.Cluster {
	if n == nil {
		return nil
	}
	return n.host
}

// start lets the rebalancer take shards: after setup started every entity
// type.
func (n *clusterNode) start() {
	if n != nil {
		n.host.Rebalancer().Start()
	}
}

// leave hands every shard this instance owns over to the others, one at
// a time, each after its commands in flight have finished, and ends the
// membership. The transport still answers meanwhile: a command forwarded
// here for a shard being handed over waits for the new owner.
func (n *clusterNode) leave(ctx context.Context) error {
	if n == nil {
		return nil
	}
	n.log.Info("leaving the cluster: handing the shards over")
	if err := n.host.Rebalancer().Leave(ctx); err != nil {
		return fmt.Errorf("leave the cluster: %w", err)
	}
	return nil
}

// close stops the transport once nothing is forwarded here any more:
// commands in flight finish (bounded by ctx).
func (n *clusterNode) close(ctx context.Context) error {
	if n == nil {
		return nil
	}
	return errors.Join(n.server.Shutdown(ctx), n.peers.Close())
}

// abort undoes a join that failed half way.
func (n *clusterNode) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	if n.host != nil {
		n.host.Rebalancer().Shutdown()
	}
	if n.member != nil {
		_ = n.member.Leave(ctx)
	}
	if n.server != nil {
		_ = n.server.Shutdown(ctx)
	}
	if n.peers != nil {
		_ = n.peers.Close()
	}
}

// abortTimeout bounds the undoing of a join that failed half way.
const abortTimeout = 10 * time.Second

// served counts the shards this instance acts for now.
func (n *clusterNode) served() int {
	if n == nil {
		return 0
	}
	count := 0
	for shard := range cluster.NumShards {
		if _, ok := n.host.Rebalancer().Serving(shard); ok {
			count++
		}
	}
	return count
}

// collectors are the cluster's series on the service's /metrics: how many
// shards this instance serves, and which member it is.
func (n *clusterNode) collectors() []prometheus.Collector {
	served := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "trellis_cluster_shards_served",
		Help: "Shards of the cluster this instance serves now (of " + fmt.Sprint(cluster.NumShards) + ").",
	}, func() float64 { return float64(n.served()) })
	member := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "trellis_cluster_member",
		Help:        "This instance's membership: always 1, with its member id and advertised address.",
		ConstLabels: prometheus.Labels{"member": n.member.ID(), "addr": n.member.Addr()},
	})
	member.Set(1)
	return []prometheus.Collector{served, member}
}
