package trellis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/clusterhost"
	"github.com/trellis-go/trellis/internal/clusterplacement"
	"github.com/trellis-go/trellis/internal/directory"
	"github.com/trellis-go/trellis/internal/faulthook"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/runtime"
)

// clusterNode is this instance's part in a cluster (on by default with a
// Redis store; see Config.ClusterAddr): the transport the other instances
// reach it by, its membership in Redis, and the entity layer's side
// (clusterhost), whose rebalancer moves shards to this instance and away.
//
// It starts in New, before the application's setup: the transport first
// (a forwarded command that comes early finds its shard not served here
// and is answered "moved"), then the membership. When Redis does not
// answer yet, the instance starts unready and joins in the background
// once it does (until then it serves no shard, and a command answers 503).
// The rebalancer starts after setup, once every entity type is started,
// so no shard is taken before its entities could run. It stops in
// Shutdown: see Service.Shutdown for the order.
type clusterNode struct {
	log      *slog.Logger
	cfg      Config
	redis    redis.UniversalClient
	registry *components.Registry // where forwarded calls run
	sys      *runtime.System      // whose actors the tells reach, and whose remote refs use peers
	tracer   trace.Tracer         // the service's; nil when tracing is off
	id       string               // the member id: the same in every join
	faults   faulthook.Points     // a test's fault points (a test kit's, see faulthook); nil in production
	metrics  *clusterMetrics      // forwards and shard moves, across joins

	// Set by the first connect, then fixed: the transport and what a join
	// registers (the same id and address every time).
	server *peer.Server
	peers  *peer.Client
	dir    *directory.Directory // the cluster-wide receptionist's registrations
	join   cluster.Config
	// placement runs each sharded entity (runtime.InitSharding) on the
	// instance that serves its shard.
	placement *clusterplacement.Placement

	// view is the membership of the moment, which the entity layer, the
	// consumers and the placement read.
	view *shardView
	// releasing stops what else runs on a shard before it is released:
	// the consumers, the views' projectors and the workflows' steps of the
	// shard.
	releasing func(ctx context.Context, shard int)

	// producers take the sends other instances hand to the queues this
	// one owns (DurableProducer), by producer id.
	producers   map[string]func(context.Context, json.RawMessage) (json.RawMessage, error)
	producersMu sync.RWMutex

	stop     chan struct{} // closed by leave or abort: no more joins
	stopOnce sync.Once
	watching sync.WaitGroup // the watcher that joins (again) while there is no membership
}

// membership is one join: the member and the entity layer's host over it.
// A membership that is lost (its lease expired in Redis: Redis was out of
// reach for longer than the lease) is replaced by a new one.
type membership struct {
	member   *cluster.Member
	host     *clusterhost.Host
	replaced chan struct{} // closed once the next membership is the node's
}

// handle runs a call another instance forwarded here, and counts it.
func (n *clusterNode) handle(ctx context.Context, c peer.Call) (peer.Reply, error) {
	reply, err := n.run(ctx, c)
	n.metrics.servedCall(c.ComponentID, err)
	return reply, err
}

// run runs a call another instance forwarded here: a send to a durable
// producer's queue, or a command of an entity.
func (n *clusterNode) run(ctx context.Context, c peer.Call) (peer.Reply, error) {
	if c.ComponentID == producerComponent {
		return n.handleSend(ctx, c)
	}
	m := n.view.cur.Load()
	if m == nil {
		return peer.Reply{}, peer.NewError(peer.KindMoved, "starting", "this instance is still joining the cluster")
	}
	return m.host.Handle(ctx, c)
}

// errListen is wrapped by the error of a cluster transport that could not
// listen (the port taken, say): a start-up failure, not Redis's absence,
// though its error is a network one.
var errListen = errors.New("cannot listen")

// addProducer takes the sends to producer id's queue that other instances
// hand to this one.
func (n *clusterNode) addProducer(id string, receive func(context.Context, json.RawMessage) (json.RawMessage, error)) error {
	n.producersMu.Lock()
	defer n.producersMu.Unlock()
	if _, ok := n.producers[id]; ok {
		return fmt.Errorf("a durable producer of id %q runs already", id)
	}
	if n.producers == nil {
		n.producers = make(map[string]func(context.Context, json.RawMessage) (json.RawMessage, error))
	}
	n.producers[id] = receive
	return nil
}

// handleSend runs a send another instance hands to a queue this one owns.
func (n *clusterNode) handleSend(ctx context.Context, c peer.Call) (peer.Reply, error) {
	n.producersMu.RLock()
	receive := n.producers[c.Method]
	n.producersMu.RUnlock()
	if receive == nil {
		return peer.Reply{}, peer.NewError(peer.KindMoved, "no_producer", "no durable producer %q runs here", c.Method)
	}
	v, err := receive(ctx, c.Argument)
	return peer.Reply{Value: v}, err
}

// joinCluster starts the transport and joins the cluster of the
// instances that share the host's Redis and prefix, when the instance is
// part of one (else it adds no part). When Redis does not answer, the
// node joins once it does (see start); any other failure (the port taken,
// say) is an error. The node's shards are taken once every part before it
// has started (start), and handed over when the service stops.
func joinCluster(a *assembly) error {
	if a.view == nil {
		return nil
	}
	h, cfg := a.host, a.cfg
	n := &clusterNode{log: h.Logger.With("component", "cluster"), cfg: cfg, redis: h.Redis, faults: a.o.faults,
		registry: h.Client.Registry(), sys: h.System, tracer: h.Client.Tracer(), id: uuid.NewString(), stop: a.view.stop,
		metrics: newClusterMetrics(), view: a.view, releasing: func(ctx context.Context, shard int) {
			h.consumers.BeforeRelease(ctx, shard)
			h.views.BeforeRelease(ctx, shard)
			h.workflows.BeforeRelease(ctx, shard)
		}}
	m, err := n.connect(context.Background())
	switch {
	case err == nil:
		n.view.cur.Store(m)
	case store.Unavailable(err) && !errors.Is(err, errListen):
		n.log.Warn("cluster: Redis does not answer: joining once it does; until then this instance serves no entity",
			"err", store.Redact(err, cfg.RedisURL, cfg.RedisClusterURL))
	default:
		n.abort()
		return fmt.Errorf("trellis: %w", err)
	}
	a.add(part{name: "the cluster", start: n.start, stop: n.shutdown, cut: n.crash})
	h.cluster, h.node, a.admin = a.view, n, n
	a.collectors = append(a.collectors, n.collectors()...)
	// Unready until a member: the first of the checks, before the
	// application's own.
	if err := h.checks.Add("the cluster membership", a.view.ready); err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	return nil
}

// connect starts the transport (the first time) and joins the cluster
// once, making the member's host (and rebalancer, not started).
func (n *clusterNode) connect(ctx context.Context) (*membership, error) {
	if n.server == nil {
		if err := n.listen(ctx); err != nil {
			return nil, err
		}
	}
	member, err := cluster.Join(ctx, n.join)
	if err != nil {
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	host, err := clusterhost.New(clusterhost.Config{Member: member, Peers: n.peers, Registry: n.registry, Logger: n.log,
		BeforeRelease: n.beforeRelease, OnServe: n.placement.Serve, Tracer: n.tracer,
		OnMoved: n.metrics.moved, OnForward: n.metrics.forwarded})
	if err != nil {
		_ = member.Leave(ctx)
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	n.log.Info("joined the cluster", "member", n.id, "addr", n.join.Addr, "lease", n.cfg.ClusterLease.String())
	return &membership{member: member, host: host, replaced: make(chan struct{})}, nil
}

// listen starts the transport on the cluster's listen address, signed
// with the cluster secret (the one set, else the one kept in Redis).
func (n *clusterNode) listen(ctx context.Context) error {
	secret := []byte(n.cfg.ClusterSecret)
	if len(secret) == 0 {
		kept, err := cluster.SharedSecret(ctx, n.redis, n.cfg.RedisPrefix)
		if err != nil {
			return err
		}
		secret = kept
		n.log.Info("cluster: " + EnvClusterSecret + " is not set: the instances sign with the secret kept in Redis")
	}
	clientCfg := peer.ClientConfig{Secret: secret, Logger: n.log}
	// Tells carry messages to this instance's actors (runtime.RemoteRef).
	serverCfg := peer.ServerConfig{Secret: secret, Handler: n.handle, Receive: n.sys.ReceiveRemote, Logger: n.log}
	if n.faults != nil { // a test kit's fault points: see faulthook
		clientCfg.Dial, serverCfg.Listen = n.faults.Dial, n.faults.Listen
	}
	if files := n.cfg.clusterTLS(); files.Set() { // mutual TLS, the secret signing as well
		var err error
		if serverCfg.TLS, clientCfg.TLS, err = files.Load(); err != nil {
			return fmt.Errorf("cluster transport: %w", err)
		}
	}
	peers, err := peer.NewClient(clientCfg)
	if err != nil {
		return fmt.Errorf("cluster transport: %w", err)
	}
	// The server listens before the host exists (the membership needs the
	// port it got): until then a forwarded command is answered "moved",
	// and its sender routes it again.
	server, err := peer.NewServer(serverCfg)
	if err != nil {
		_ = peers.Close()
		return fmt.Errorf("cluster transport: %w", err)
	}
	listen := n.cfg.clusterListenAddr()
	if err := server.Start(listen); err != nil {
		_ = peers.Close()
		return fmt.Errorf("cluster transport: %w on %s (%s): %w", errListen, listen, EnvClusterAddr, err)
	}
	advertise, err := advertised(n.cfg, server.Addr())
	if err != nil {
		_ = peers.Close()
		_ = server.Shutdown(ctx)
		return err
	}
	prefix := n.cfg.RedisPrefix
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	space, err := keyspace.New(prefix)
	if err == nil {
		n.dir, err = directory.New(directory.Config{Client: n.redis, Space: space, Self: advertise, Lease: n.cfg.ClusterLease, Logger: n.log})
	}
	if err != nil {
		_ = peers.Close()
		_ = server.Shutdown(ctx)
		return fmt.Errorf("cluster receptionist: %w", err)
	}
	n.server, n.peers = server, peers
	n.sys.SetRemote(advertise, peers) // refs to other instances' actors travel over peers
	n.sys.SetDirectory(n.dir)         // the receptionist lists every instance's registrations
	n.placement = clusterplacement.New(n.sys, n.view, advertise)
	n.join = cluster.Config{Client: n.redis, Prefix: n.cfg.RedisPrefix, ID: n.id, Addr: advertise,
		Lease: n.cfg.ClusterLease, Logger: n.log}
	return nil
}

// beforeRelease stops the consumers of shard before it is released:
// before its commands drain, since a handler may call its entities. Then
// the shard's sharded entities (runtime.Sharding) stop here: their
// messages go to the next owner.
func (n *clusterNode) beforeRelease(ctx context.Context, shard int) {
	n.releasing(ctx, shard)
	n.placement.BeforeRelease(ctx, shard)
}

// advertised is the address the other instances dial: the advertise
// address, else the listen address; a host left out or unspecified (":25520",
// "0.0.0.0:25520") is this machine's first private address (see
// localAddress), and a port 0 is the one the listener got.
func advertised(cfg Config, bound string) (string, error) {
	addr := cfg.ClusterAdvertiseAddr
	if addr == "" {
		addr = cfg.clusterListenAddr()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("cluster advertise address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = localAddress()
	}
	if port == "0" {
		if _, port, err = net.SplitHostPort(bound); err != nil {
			return "", fmt.Errorf("cluster listen address %q: %w", bound, err)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// localAddress is the address this machine is most likely reached at by
// the other instances: its first private IPv4 address (a container's
// address on its network, a pod's IP, a host's LAN address), else its
// first other non-loopback unicast address, else the loopback address.
func localAddress() string {
	addrs, _ := net.InterfaceAddrs() // none on error: loopback
	var other string
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok || ipnet.IP.IsLoopback() || !ipnet.IP.IsGlobalUnicast() {
			continue
		}
		if ipnet.IP.To4() != nil && ipnet.IP.IsPrivate() {
			return ipnet.IP.String()
		}
		if other == "" {
			other = ipnet.IP.String()
		}
	}
	if other != "" {
		return other
	}
	return "127.0.0.1"
}

// start lets the rebalancer take shards (once every part before the
// cluster started: every entity type and consumer), and watches the
// membership: when it is lost, the node joins again.
func (n *clusterNode) start(context.Context) error {
	if m := n.view.cur.Load(); m != nil {
		m.host.Rebalancer().Start()
	}
	n.watching.Go(n.watch)
	return nil
}

// shutdown hands the shards over (leave), then stops the transport (close).
// A Redis out of reach cannot take the shards back: the others take them
// when this member's lease lapses, as after a kill.
func (n *clusterNode) shutdown(ctx context.Context) error {
	var errs []error
	switch err := n.leave(ctx); {
	case store.Unavailable(err):
		n.log.Warn("shutting down: could not hand the shards over, Redis does not answer: the other instances serve them once this one's lease lapses",
			"err", store.Redact(err, n.cfg.RedisURL, n.cfg.RedisClusterURL))
	case err != nil:
		errs = append(errs, err)
	}
	if err := n.close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop the cluster transport: %w", err))
	}
	return errors.Join(errs...)
}

// leave hands every shard this instance owns over to the others, one at
// a time, each after its commands in flight have finished, and ends the
// membership. The transport still answers meanwhile: a command forwarded
// here for a shard being handed over waits for the new owner.
func (n *clusterNode) leave(ctx context.Context) error {
	n.stopJoining()
	m := n.view.cur.Load()
	if m == nil {
		return nil
	}
	n.log.Info("leaving the cluster: handing the shards over")
	err := m.host.Rebalancer().Leave(ctx)
	if errors.Is(err, cluster.ErrGone) {
		n.log.Warn("leaving the cluster: the membership had lapsed already; the others serve its shards", "err", err)
		return nil
	}
	if err != nil {
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
	if n.server == nil { // never listened: Redis never answered
		return nil
	}
	return errors.Join(n.dir.Close(ctx), n.server.Shutdown(ctx), n.peers.Close())
}

// abort undoes a join that failed half way.
func (n *clusterNode) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	n.stopJoining()
	if m := n.view.cur.Load(); m != nil {
		m.host.Rebalancer().Shutdown()
		_ = m.member.Leave(ctx)
	}
	if n.server != nil {
		_ = errors.Join(n.dir.Close(ctx), n.server.Shutdown(ctx), n.peers.Close())
	}
}

// abortTimeout bounds the undoing of a join that failed half way.
const abortTimeout = 10 * time.Second

// crash ends the node's part in the cluster without a word to Redis or
// to the other instances: no more renewals, moves or joins, the shards
// still recorded as owned, the transport's connections closed at once.
func (n *clusterNode) crash() {
	n.stopJoining()
	if m := n.view.cur.Load(); m != nil {
		m.host.Rebalancer().Shutdown()
		m.member.Abandon()
	}
	if n.server == nil { // never listened: Redis never answered
		return
	}
	n.dir.Abandon() // its registrations lapse with the lease
	now, cancel := context.WithCancel(context.Background())
	cancel() // a done context: the server closes its connections at once
	_ = n.server.Shutdown(now)
	_ = n.peers.Close()
}

// collectors are the cluster's series on the service's /metrics: how many
// shards this instance serves, which member it is, its view of the
// cluster (viewCollectors), and its forwards and shard moves
// (clusterMetrics).
func (n *clusterNode) collectors() []prometheus.Collector {
	served := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "trellis_cluster_shards_served",
		Help: "Shards of the cluster this instance serves now (of " + fmt.Sprint(cluster.NumShards) + ").",
	}, func() float64 { return float64(n.view.served()) })
	member := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "trellis_cluster_member",
		Help:        "This instance's membership: 1 while it is a member of the cluster, 0 while it joins; its member id as a label.",
		ConstLabels: prometheus.Labels{"member": n.id},
	}, func() float64 {
		if n.view.cur.Load() == nil {
			return 0
		}
		return 1
	})
	return slices.Concat([]prometheus.Collector{served, member}, n.viewCollectors(), n.metrics.collectors())
}
