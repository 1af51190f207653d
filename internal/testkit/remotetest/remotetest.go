// Package remotetest runs instances for tests of refs that cross
// instances: each a runtime System whose remote refs travel over the real
// cluster transport (internal/peer, HTTP/2 on loopback), and which the
// other instances reach through a fault proxy (peertest.Proxy) in front of
// its server, so a test can cut, stall, blackhole or garble the link.
package remotetest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/cluster/directory"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/runtime"
)

// secret is the cluster secret every test instance shares.
var secret = []byte("remotetest: a secret of at least thirty-two bytes")

// health finds a blackholed connection within a fraction of a second, so
// tests of partitions need not wait the production default. A direct node
// (benchmarks, no proxy to blackhole it) keeps the production default: on
// a loaded machine a ping may go unanswered for 200 ms, and the health
// check would then break a connection that works, losing what was in
// flight on its streams.
var health = peer.Health{Idle: 100 * time.Millisecond, Timeout: 200 * time.Millisecond}

// Node is one instance: its System, the transport's server and client, and
// the proxy through which the others reach it.
type Node struct {
	Sys    *runtime.System
	Server *peer.Server
	Client *peer.Client
	Proxy  *peertest.Proxy
	addr   string
	dir    *directory.Directory
	member *Member // JoinCluster's
	cfg    Config
	log    *slog.Logger
}

// Directory makes an instance's receptionist cluster-wide: a directory
// in the Redis of Client under Space, with the given Lease (a tenth of it
// between polls), withdrawn at the test's end.
type Directory struct {
	Client redis.UniversalClient
	Space  keyspace.Space
	Lease  time.Duration
}

// Connect links the instance's System to the others (runtime.System.Connect),
// with its directory if its Config has one, and the placement of its
// cluster membership (JoinCluster, before) or of its Config: NewNodeWith
// calls it unless the Config defers it.
func (n *Node) Connect(tb testing.TB) {
	tb.Helper()
	link := runtime.Link{Self: n.addr, Remote: n.Client}
	if n.member != nil {
		link.Placement = n.member.Placement
	} else if n.cfg.Placement != nil {
		link.Placement = n.cfg.Placement(n.addr)
	}
	if c := n.cfg.Directory; c != nil {
		d, err := directory.New(directory.Config{Client: c.Client, Space: c.Space, Self: n.addr, Lease: c.Lease, Poll: c.Lease / 10, Logger: n.log})
		if err != nil {
			tb.Fatalf("remotetest: %v", err)
		}
		n.dir, link.Directory = d, d
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := d.Close(ctx); err != nil {
				tb.Errorf("remotetest: %v", err)
			}
		})
	}
	if err := n.Sys.Connect(link); err != nil {
		tb.Fatalf("remotetest: %v", err)
	}
}

// Addr is the address the other instances reach this one at: its proxy's
// (or its server's, for a direct node).
func (n *Node) Addr() string { return n.addr }

// NewNode starts an instance named name and stops it at the test's end
// (System, then client, server and proxy). log may be nil (discard).
func NewNode(tb testing.TB, name string, log *slog.Logger, opts ...runtime.Option) *Node {
	tb.Helper()
	return NewNodeWith(tb, name, Config{Log: log, Runtime: opts})
}

// NewDirectNode is NewNode, except that the others reach it at its server's
// own address, bypassing the proxy, and its connections have the
// production health check (peer.DefaultHealth): for benchmarks of the bare
// transport.
func NewDirectNode(tb testing.TB, name string, log *slog.Logger, opts ...runtime.Option) *Node {
	tb.Helper()
	return NewNodeWith(tb, name, Config{Log: log, Direct: true, Runtime: opts})
}

// Config is how NewNodeWith makes an instance.
type Config struct {
	Log       *slog.Logger     // nil: discard
	Direct    bool             // reached at its server's address, with the production health check, as NewDirectNode
	TellQueue int              // its client's peer.ClientConfig.TellQueue (0: the default)
	Runtime   []runtime.Option // of its System
	Directory *Directory       // nil: its receptionist stays local
	// Placement, when set, makes the placement of its sharded entities,
	// given the address the others reach it at.
	Placement func(self string) runtime.Placement
	// Deferred leaves the System unconnected until the test calls
	// Node.Connect: refs to the others are dead letters until then.
	Deferred bool
}

// NewNodeWith is NewNode with the settings of cfg.
func NewNodeWith(tb testing.TB, name string, cfg Config) *Node {
	tb.Helper()
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sys := runtime.NewSystem(name, append([]runtime.Option{runtime.WithLogger(log)}, cfg.Runtime...)...)
	n := &Node{Sys: sys, cfg: cfg, log: log}
	srv, err := peer.NewServer(peer.ServerConfig{Secret: secret, Receive: sys.ReceiveRemote, Handler: noForwards, Logger: log})
	if err != nil {
		tb.Fatalf("remotetest: %v", err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		tb.Fatalf("remotetest: %v", err)
	}
	n.Server = srv
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("remotetest: server shutdown: %v", err)
		}
	})
	n.Proxy = peertest.NewProxy(tb, srv.Addr())
	h := health
	if cfg.Direct {
		h = peer.DefaultHealth
	}
	client, err := peer.NewClient(peer.ClientConfig{Secret: secret, Logger: log, Health: h, TellQueue: cfg.TellQueue})
	if err != nil {
		tb.Fatalf("remotetest: %v", err)
	}
	n.Client = client
	tb.Cleanup(func() { _ = client.Close() })
	n.addr = n.Proxy.Addr()
	if cfg.Direct {
		n.addr = srv.Addr()
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			tb.Errorf("remotetest: system shutdown: %v", err)
		}
	})
	if !cfg.Deferred {
		n.Connect(tb)
	}
	return n
}

// noForwards answers forwards: these instances only take tells.
func noForwards(context.Context, peer.Call) (peer.Reply, error) {
	return peer.Reply{}, peer.NewError(peer.KindNotFound, "", "this test instance takes no forwards")
}

// Kill ends the instance at once, as kill -9 would for the others: its
// proxy resets every connection and turns new ones away, its client drops
// what it still queues, its directory and its cluster membership stop
// renewing (the others take its shards once its lease runs out). Its System keeps
// running until the test ends (the test's actors on it are cut off, not
// stopped).
func (n *Node) Kill() {
	if n.dir != nil {
		n.dir.Abandon() // its registrations lapse with the lease
	}
	if n.member != nil {
		n.member.abandon()
	}
	n.Proxy.Refuse(true)
	n.Proxy.Cut()
	_ = n.Client.Close()
}
