package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
)

// DefaultLease is the membership lease a service should configure when
// its operator sets none. 10 s rides out a stop-the-world pause, a slow
// fsync or a Redis failover (about 3 s with the test cluster's 2 s node
// timeout) without losing the lease, since a renewal is tried every
// 3.3 s; and a crashed instance's shards are served again by others
// within the lease plus one rebalance poll (lease/3), about 13 s.
const DefaultLease = 10 * time.Second

// DefaultMargin is the margin [Config.Margin] takes when zero: time taken
// off an owner's own view of its lease, on top of the 10 % for clock-rate
// drift, for the scheduling delay between reading the clock and acting.
const DefaultMargin = 200 * time.Millisecond

// MaxIDLen bounds a member id; a uuid has 36 characters.
const MaxIDLen = 64

// ErrBadConfig is wrapped by every configuration error of [Join].
var ErrBadConfig = errors.New("cluster: invalid configuration")

// Config is what [Join] needs to register an instance.
type Config struct {
	// Client reaches the service's Redis or Redis Cluster. Required; the
	// caller closes it.
	Client redis.UniversalClient
	// Prefix starts every key (keyspace.DefaultPrefix when empty).
	Prefix string
	// ID names the instance: 1 to MaxIDLen characters of A-Z a-z 0-9 . _ -
	// (a uuid). It must be unique among live members.
	ID string
	// Addr is the host:port other instances reach this one's transport at.
	Addr string
	// Lease is how long Redis keeps the membership without a renewal.
	// Required (DefaultLease is the recommended value).
	Lease time.Duration
	// Margin is taken off the local view of the lease besides 10 %
	// (DefaultMargin when zero).
	Margin time.Duration
	// ReplaceSameAddr: this member replaces the earlier incarnations at
	// its Addr once they have stopped renewing, instead of waiting for
	// their leases to lapse (see [Member.replace] for the rule). Set it
	// only when this process surely holds Addr: no other live process can
	// be reached there.
	ReplaceSameAddr bool
	// Clock is the local monotonic clock (the real one when nil).
	Clock clockwork.Clock
	// Logger receives the background loops' events (slog.Default when nil).
	Logger *slog.Logger
}

// withDefaults returns c with the optional fields filled in.
func (c Config) withDefaults() Config {
	if c.Margin == 0 {
		c.Margin = DefaultMargin
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// check says what is wrong with a Config that has its defaults; every
// error wraps ErrBadConfig.
func (c Config) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadConfig, fmt.Sprintf(format, args...))
	}
	if c.Client == nil {
		return bad("Client is nil: a Redis client is required")
	}
	if err := keyspace.CheckPrefix(c.prefix()); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if err := checkID(c.ID); err != nil {
		return bad("%v", err)
	}
	if err := checkAddr(c.Addr); err != nil {
		return bad("%v", err)
	}
	if c.Lease <= 0 {
		return bad("Lease is %v: it must be positive (DefaultLease is %v)", c.Lease, DefaultLease)
	}
	if c.Lease%time.Millisecond != 0 {
		return bad("Lease %v is not a whole number of milliseconds (Redis counts expiry in ms)", c.Lease)
	}
	if c.Margin < 0 {
		return bad("Margin is %v: it must not be negative", c.Margin)
	}
	if w := window(c.Lease, c.Margin); w <= c.Lease/3 {
		return bad("Lease %v with Margin %v leaves a serving window of %v, no longer than the renewal interval %v: "+
			"an owner would stop serving between two renewals; lengthen the lease or shorten the margin",
			c.Lease, c.Margin, w, c.Lease/3)
	}
	return nil
}

func (c Config) prefix() string {
	if c.Prefix == "" {
		return keyspace.DefaultPrefix
	}
	return c.Prefix
}

// checkID: 1 to MaxIDLen characters of A-Z a-z 0-9 . _ -: the id is part
// of a key and of log lines, so it stays plain.
func checkID(id string) error {
	if id == "" {
		return errors.New("ID is empty: every member needs an id (a uuid)")
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("ID is %d bytes long; at most %d", len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("ID %q has %q at byte %d: use only A-Z a-z 0-9 . _ -", id, c, i)
		}
	}
	return nil
}

// checkAddr: host:port with a non-empty host and a port in 1..65535.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("Addr %q is not host:port: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("Addr %q has no host: other instances could not reach it", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("Addr %q has port %q: want a number from 1 to 65535", addr, port)
	}
	return nil
}
