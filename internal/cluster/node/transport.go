package node

import (
	"context"
	"fmt"
	"net"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/cluster/directory"
	"github.com/trellis-go/trellis/internal/cluster/placement"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/runtime"
)

// listen starts the transport on the cluster's listen address, signed
// with the cluster secret (the one set, else the one kept in Redis).
func (n *Node) listen(ctx context.Context) error {
	secret := n.cfg.Secret
	if len(secret) == 0 {
		kept, err := cluster.SharedSecret(ctx, n.cfg.Redis, n.cfg.Prefix)
		if err != nil {
			return err
		}
		secret = kept
		n.log.Info("cluster: " + peer.EnvSecret + " is not set: the instances sign with the secret kept in Redis")
	}
	clientCfg := peer.ClientConfig{Secret: secret, Logger: n.log}
	// Tells carry messages to this instance's actors (runtime.RemoteRef).
	serverCfg := peer.ServerConfig{Secret: secret, Handler: n.handle, Receive: n.cfg.System.ReceiveRemote, Logger: n.log}
	if n.cfg.Faults != nil { // a test kit's fault points: see faulthook
		clientCfg.Dial, serverCfg.Listen = n.cfg.Faults.Dial, n.cfg.Faults.Listen
	}
	if files := n.cfg.TLS; files.Set() { // mutual TLS, the secret signing as well
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
	if err := server.Start(n.cfg.Listen); err != nil {
		_ = peers.Close()
		return fmt.Errorf("cluster transport: %w on %s (%s): %w", ErrListen, n.cfg.Listen, n.cfg.ListenSetting, err)
	}
	advertise, err := advertised(n.cfg.Advertise, n.cfg.Listen, server.Addr())
	if err != nil {
		_ = peers.Close()
		_ = server.Shutdown(ctx)
		return err
	}
	prefix := n.cfg.Prefix
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	space, err := keyspace.New(prefix)
	if err == nil {
		n.dir, err = directory.New(directory.Config{Client: n.cfg.Redis, Space: space, Self: advertise, Lease: n.cfg.Lease, Logger: n.log})
	}
	if err != nil {
		_ = peers.Close()
		_ = server.Shutdown(ctx)
		return fmt.Errorf("cluster receptionist: %w", err)
	}
	// The system's one hand-off: refs to other instances' actors travel
	// over peers, the receptionist lists every instance's registrations
	// (those of the setup that ran before, too), and each sharded entity
	// runs on the instance that serves its shard.
	place := placement.New(n.cfg.System, n.view, advertise)
	if err := n.cfg.System.Connect(runtime.Link{Self: advertise, Remote: peers, Directory: n.dir, Placement: place}); err != nil {
		n.dir.Abandon()
		_ = peers.Close()
		_ = server.Shutdown(ctx)
		return fmt.Errorf("cluster transport: %w", err)
	}
	n.server, n.peers = server, peers
	n.placement = place
	n.join = cluster.Config{Client: n.cfg.Redis, Prefix: n.cfg.Prefix, ID: n.id, Addr: advertise,
		Lease: n.cfg.Lease, Logger: n.log, ReplaceSameAddr: holdsAddr(ctx, advertise, server.Addr())}
	return nil
}

// advertised is the address the other instances dial: advertise, else
// the listen address; a host left out or unspecified (":25520",
// "0.0.0.0:25520") is this machine's first private address (see
// localAddress), and a port 0 is the one the listener got (bound).
func advertised(advertise, listen, bound string) (string, error) {
	addr := advertise
	if addr == "" {
		addr = listen
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
