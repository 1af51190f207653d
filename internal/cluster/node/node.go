package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/cluster/directory"
	"github.com/trellis-go/trellis/internal/cluster/entityhost"
	"github.com/trellis-go/trellis/internal/cluster/placement"
	"github.com/trellis-go/trellis/internal/faulthook"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/runtime"
)

// Config is what Join needs.
type Config struct {
	// Redis holds the membership, the shards' records and the
	// receptionist's registrations, under Prefix ("" the default).
	Redis  redis.UniversalClient
	Prefix string
	// Lease is the membership's lease.
	Lease time.Duration
	// Secret signs the transport; empty: the secret kept in Redis.
	Secret []byte
	// Listen is where the transport listens, and ListenSetting the
	// setting that names it, in errors.
	Listen, ListenSetting string
	// Advertise is the address the other instances dial; empty: Listen
	// (see advertised).
	Advertise string
	// TLS, when set, makes the transport mutual TLS.
	TLS peer.TLSFiles
	// Shards is the membership of the moment, which Join keeps up to
	// date: made beforehand (NewShards) for the parts that read it.
	Shards *Shards
	// Registry is where forwarded calls run, System the actor system
	// whose actors the tells reach and whose remote refs use the peers,
	// Tracer the service's (nil: tracing is off).
	Registry *components.Registry
	System   *runtime.System
	Tracer   trace.Tracer
	// BeforeRelease stops what else runs on a shard before it is
	// released (the consumers and the views' projectors of the shard).
	BeforeRelease func(ctx context.Context, shard int)
	// Faults are a test kit's fault points (see faulthook); nil in
	// production.
	Faults faulthook.Points
	// Logger logs the node's lines; Secrets are the store's URLs, which
	// its lines redact.
	Logger  *slog.Logger
	Secrets []string
}

// Node is this instance's part in a cluster (on by default with a Redis
// store): the transport the other instances reach it by, its membership
// in Redis, and the entity layer's side (entityhost), whose rebalancer
// moves shards to this instance and away.
//
// Join starts it before the application's setup: the transport first (a
// forwarded command that comes early finds its shard not served here and
// is answered "moved"), then the membership. When Redis does not answer
// yet, the instance starts unready and joins in the background once it
// does (until then it serves no shard, and a command answers 503). The
// rebalancer starts with Start, once every entity type is started, so no
// shard is taken before its entities could run.
type Node struct {
	cfg     Config
	log     *slog.Logger
	id      string   // the member id: the same in every join
	metrics *metrics // forwards and shard moves, across joins
	view    *Shards
	calls   *peer.Mux // the kinds of forwarded call; entity commands by default

	// Set by the first connect, then fixed: the transport and what a join
	// registers (the same id and address every time).
	server *peer.Server
	peers  *peer.Client
	dir    *directory.Directory // the cluster-wide receptionist's registrations
	join   cluster.Config
	// placement runs each sharded entity (runtime.InitSharding) on the
	// instance that serves its shard.
	placement *placement.Placement

	stopOnce sync.Once
	watching sync.WaitGroup // the watcher that joins (again) while there is no membership
}

// ErrListen is wrapped by the error of a transport that could not listen
// (the port taken, say): a start-up failure, not Redis's absence, though
// its error is a network one.
var ErrListen = errors.New("cannot listen")

// Join starts the transport and joins the cluster of the instances that
// share cfg.Redis and cfg.Prefix. When Redis does not answer, the node
// joins once it does (see Start); any other failure (the port taken, say)
// is an error, and the node undoes what it started.
func Join(cfg Config) (*Node, error) {
	n := &Node{cfg: cfg, log: cfg.Logger.With("component", "cluster"), id: uuid.NewString(), metrics: newMetrics(), view: cfg.Shards}
	n.calls = peer.NewMux(n.runCommand)
	m, err := n.connect(context.Background())
	switch {
	case err == nil:
		n.view.cur.Store(m)
	case store.Unavailable(err) && !errors.Is(err, ErrListen):
		n.log.Warn("cluster: Redis does not answer: joining once it does; until then this instance serves no entity",
			"err", store.Redact(err, cfg.Secrets...))
	default:
		n.abort()
		return nil, err
	}
	return n, nil
}

// Handle registers h for the forwarded calls of kind (their component
// id): a kind of call of the part that owns it, such as the durable
// producers' hand-over. Every other call is an entity command.
func (n *Node) Handle(kind string, h peer.Handler) error { return n.calls.Handle(kind, h) }

// Forward sends call to the instance at addr over the transport, and
// counts it by its component id (see metrics.forwarded).
func (n *Node) Forward(ctx context.Context, addr string, call peer.Call) (peer.Reply, error) {
	started := time.Now()
	reply, err := n.peers.Forward(ctx, addr, call)
	n.metrics.forwarded(call.ComponentID, time.Since(started), err)
	return reply, err
}

// Holder is this instance's name as the holder of a queue it owns (its
// member id and address), and whether the transport listens: only then
// can the others reach it. It is fixed once Join returns: a transport
// that did not listen then (Redis did not answer) is false for good.
func (n *Node) Holder() (string, bool) {
	if n.peers == nil {
		return "", false
	}
	return n.id + " " + n.join.Addr, true
}

// handle runs a call another instance forwarded here, by its kind, and
// counts it.
func (n *Node) handle(ctx context.Context, c peer.Call) (peer.Reply, error) {
	reply, err := n.calls.Serve(ctx, c)
	n.metrics.servedCall(c.ComponentID, err)
	return reply, err
}

// runCommand runs an entity command another instance forwarded here.
func (n *Node) runCommand(ctx context.Context, c peer.Call) (peer.Reply, error) {
	m := n.view.cur.Load()
	if m == nil {
		return peer.Reply{}, peer.NewError(peer.KindMoved, "starting", "this instance is still joining the cluster")
	}
	return m.host.Handle(ctx, c)
}

// connect starts the transport (the first time) and joins the cluster
// once, making the member's host (and rebalancer, not started).
func (n *Node) connect(ctx context.Context) (*membership, error) {
	if n.server == nil {
		if err := n.listen(ctx); err != nil {
			return nil, err
		}
	}
	member, err := cluster.Join(ctx, n.join)
	if err != nil {
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	host, err := entityhost.New(entityhost.Config{Member: member, Peers: n.peers, Registry: n.cfg.Registry, Logger: n.log,
		BeforeRelease: n.beforeRelease, OnServe: n.placement.Serve, Tracer: n.cfg.Tracer,
		OnMoved: n.metrics.moved, OnForward: n.metrics.forwarded})
	if err != nil {
		_ = member.Leave(ctx)
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	n.log.Info("joined the cluster", "member", n.id, "addr", n.join.Addr, "lease", n.cfg.Lease.String())
	return &membership{member: member, host: host, replaced: make(chan struct{})}, nil
}

// beforeRelease stops what else runs on shard before it is released:
// before its commands drain, since a handler may call its entities. Then
// the shard's sharded entities (runtime.Sharding) stop here: their
// messages go to the next owner.
func (n *Node) beforeRelease(ctx context.Context, shard int) {
	if n.cfg.BeforeRelease != nil {
		n.cfg.BeforeRelease(ctx, shard)
	}
	n.placement.BeforeRelease(ctx, shard)
}

// Collectors are the cluster's series on the service's /metrics: how
// many shards this instance serves, which member it is, its view of the
// cluster (viewCollectors), and its forwards and shard moves (metrics).
func (n *Node) Collectors() []prometheus.Collector {
	served := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "trellis_cluster_shards_served",
		Help: "Shards of the cluster this instance serves now (of " + fmt.Sprint(cluster.NumShards) + ").",
	}, func() float64 { return float64(n.view.Served()) })
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
