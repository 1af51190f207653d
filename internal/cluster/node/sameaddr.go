package node

import (
	"context"
	"net"
	"slices"
	"time"
)

// holdsAddr reports whether this process surely holds the advertised
// address advertise, its transport listening on bound: the port is the
// one bound, and every IP the advertised host is (itself, or what its name
// resolves to) is an address of this machine that the listener covers
// (bound on it, or on every address). Then no other live process can be
// reached at advertise, and an earlier incarnation registered there that
// has stopped renewing is this process's predecessor: a restart in place
// (cluster.Config.ReplaceSameAddr). When in doubt (a name that does not
// resolve, an address of another machine, a NAT), it is false, and the
// predecessor's lease lapses by itself.
func holdsAddr(ctx context.Context, advertise, bound string) bool {
	host, port, err := net.SplitHostPort(advertise)
	if err != nil {
		return false
	}
	bhost, bport, err := net.SplitHostPort(bound)
	if err != nil || port != bport {
		return false
	}
	ips := []net.IP{net.ParseIP(host)}
	if ips[0] == nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if ips, err = net.DefaultResolver.LookupIP(ctx, "ip", host); err != nil || len(ips) == 0 {
			return false
		}
	}
	local := localIPs()
	bip := net.ParseIP(bhost)
	for _, ip := range ips {
		own := slices.ContainsFunc(local, ip.Equal)
		covered := bip == nil || bip.IsUnspecified() || bip.Equal(ip)
		if !own || !covered {
			return false
		}
	}
	return true
}

// localIPs are the addresses of this machine's interfaces, loopback
// included.
func localIPs() []net.IP {
	addrs, _ := net.InterfaceAddrs() // none on error: nothing is held
	var ips []net.IP
	for _, a := range addrs {
		if ipnet, ok := a.(*net.IPNet); ok {
			ips = append(ips, ipnet.IP)
		}
	}
	return ips
}
