package trellis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/consumers"
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
	log      *slog.Logger
	server   *peer.Server
	peers    *peer.Client
	join     cluster.Config       // what a join registers: the same id and address every time
	registry *components.Registry // where forwarded calls run
	// consumers is the service's consumer runner, which stops consuming
	// a shard before it is released (set before start).
	consumers func() *consumers.Runner

	cur      atomic.Pointer[membership] // the membership now; nil until the first join
	stop     chan struct{}              // closed by leave or abort: no more joins
	stopOnce sync.Once
	watching sync.WaitGroup // the watcher that joins again after a lost membership
}

// membership is one join: the member and the entity layer's host over it.
// A membership that is lost (its lease expired in Redis: Redis was out of
// reach for longer than the lease) is replaced by a new one.
type membership struct {
	member *cluster.Member
	host   *clusterhost.Host
}

// handle runs a call another instance forwarded here.
func (n *clusterNode) handle(ctx context.Context, c peer.Call) (peer.Reply, error) {
	m := n.cur.Load()
	if m == nil {
		return peer.Reply{}, peer.NewError(peer.KindMoved, "starting", "this instance is still joining the cluster")
	}
	return m.host.Handle(ctx, c)
}

// joinCluster starts the transport on cfg.ClusterAddr and joins the
// cluster of the instances that share h's Redis and prefix. A listen
// address with port 0 advertises the port it got.
func joinCluster(ctx context.Context, h *Host, cfg Config) (_ *clusterNode, err error) {
	n := &clusterNode{log: h.Logger.With("component", "cluster"), registry: h.Client.Registry(), stop: make(chan struct{})}
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
	n.join = cluster.Config{Client: h.Redis, Prefix: cfg.RedisPrefix, ID: uuid.NewString(), Addr: advertise,
		Lease: cfg.ClusterLease, Logger: n.log}
	m, err := n.joinOnce(ctx)
	if err != nil {
		return nil, err
	}
	n.cur.Store(m)
	n.log.Info("joined the cluster", "member", n.join.ID, "addr", advertise, "lease", cfg.ClusterLease.String())
	return n, nil
}

// joinOnce registers the member and makes its host (and rebalancer, not
// started).
func (n *clusterNode) joinOnce(ctx context.Context) (*membership, error) {
	member, err := cluster.Join(ctx, n.join)
	if err != nil {
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	host, err := clusterhost.New(clusterhost.Config{Member: member, Peers: n.peers, Registry: n.registry, Logger: n.log,
		BeforeRelease: n.beforeRelease})
	if err != nil {
		_ = member.Leave(ctx)
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	return &membership{member: member, host: host}, nil
}

// beforeRelease stops the consumers of shard before it is released:
// before its commands drain, since a handler may call its entities.
func (n *clusterNode) beforeRelease(ctx context.Context, shard int) {
	if n.consumers != nil {
		n.consumers().BeforeRelease(ctx, shard)
	}
}

// Serving is consumers.Shards: whether this instance serves shard now,
// in its membership of the moment.
func (n *clusterNode) Serving(shard int) (cluster.Fence, bool) {
	return n.cur.Load().host.Rebalancer().Serving(shard)
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

// entities is the cluster the entity layer routes through (the node
// itself, which follows its membership across joins); nil when the
// instance is not part of one.
func (n *clusterNode) entities() entities.Cluster {
	if n == nil {
		return nil
	}
	return n
}

// start lets the rebalancer take shards (after setup started every entity
// type), and watches the membership: when it is lost, the node joins
// again.
func (n *clusterNode) start() {
	if n == nil {
		return
	}
	n.cur.Load().host.Rebalancer().Start()
	n.watching.Go(n.watch)
}

// leave hands every shard this instance owns over to the others, one at
// a time, each after its commands in flight have finished, and ends the
// membership. The transport still answers meanwhile: a command forwarded
// here for a shard being handed over waits for the new owner.
func (n *clusterNode) leave(ctx context.Context) error {
	if n == nil {
		return nil
	}
	n.stopJoining()
	n.log.Info("leaving the cluster: handing the shards over")
	if err := n.cur.Load().host.Rebalancer().Leave(ctx); err != nil {
		return fmt.Errorf("leave the cluster: %w", err)
	}
	return nil
}

// stopJoining stops the watcher, and waits for a join it may be making.
func (n *clusterNode) stopJoining() {
	n.stopOnce.Do(func() { close(n.stop) })
	n.watching.Wait()
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
	n.stopJoining()
	if m := n.cur.Load(); m != nil {
		m.host.Rebalancer().Shutdown()
		_ = m.member.Leave(ctx)
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
	reb := n.cur.Load().host.Rebalancer()
	for shard := range cluster.NumShards {
		if _, ok := reb.Serving(shard); ok {
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
		ConstLabels: prometheus.Labels{"member": n.join.ID, "addr": n.join.Addr},
	})
	member.Set(1)
	return []prometheus.Collector{served, member}
}
