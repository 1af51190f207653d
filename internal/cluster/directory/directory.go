// Package directory is the cluster-wide receptionist's store: the actors
// each instance registered under a service, kept in Redis under the
// service's key prefix, each instance's entries with a lease that it
// renews. An instance that dies stops renewing, and its entries lapse
// after the lease; one that leaves withdraws them (Close). It implements
// runtime.Directory; the service wires it in.
//
// Redis rather than gossip over the cluster transport: the instances
// already share a Redis and the membership lives there, so a registration
// reaches every instance without a peer-to-peer protocol of its own, an
// instance that joins late reads the whole listing at once, and a dead
// instance's entries go by the same kind of lease as its membership. The
// cost is a poll: a change is seen within Poll (a third of the lease by
// default), which suits workers that come and go by the second.
//
// Each service is one hash, <prefix>:directory:<service>, a field per
// instance address holding "<until, Redis time in ms>|<paths, one per
// line>"; both scripts read the time from Redis, so the instances' clocks
// need not agree.
package directory

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/runtime"
)

// DefaultLease is how long an instance's entries outlive its last renewal.
const DefaultLease = 6 * time.Second

// Config configures a Directory.
type Config struct {
	Client redis.UniversalClient
	Space  keyspace.Space
	// Self is this instance's address (its entries' field, and what is
	// left out of what Watch reports).
	Self string
	// Lease is how long entries outlive their last renewal (default
	// DefaultLease); they are renewed, and the others' read, every Poll
	// (default Lease/3).
	Lease, Poll time.Duration
	Logger      *slog.Logger
}

// Directory keeps this instance's entries in Redis and follows the
// others'. Make it with New, end it with Close.
type Directory struct {
	cfg  Config
	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	mine    map[string][]string // service -> paths, as last published
	dirty   map[string]bool     // services to write at the next round
	watches map[string][]func([]runtime.RefAddress)
	seen    map[string][]runtime.RefAddress // service -> what the watchers were last told
	closed  bool
}

var _ runtime.Directory = (*Directory)(nil)

// New checks cfg and starts the directory's goroutine.
func New(cfg Config) (*Directory, error) {
	if cfg.Client == nil || cfg.Self == "" {
		return nil, fmt.Errorf("directory: a Redis client and this instance's address are needed (client %v, address %q)", cfg.Client != nil, cfg.Self)
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Poll <= 0 || cfg.Poll > cfg.Lease/2 {
		cfg.Poll = cfg.Lease / 3
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Directory{cfg: cfg, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		mine: map[string][]string{}, dirty: map[string]bool{}, watches: map[string][]func([]runtime.RefAddress){}, seen: map[string][]runtime.RefAddress{}}
	go d.run()
	return d, nil
}

// Publish replaces this instance's entries of service; they are written
// at once, in the background.
func (d *Directory) Publish(service string, refs []runtime.RefAddress) {
	paths := make([]string, 0, len(refs))
	for _, a := range refs {
		paths = append(paths, a.Path)
	}
	d.mu.Lock()
	d.mine[service], d.dirty[service] = paths, true
	d.mu.Unlock()
	d.poke()
}

// Watch calls update with the other instances' entries of service after
// the next read, and after each change, from the directory's goroutine.
func (d *Directory) Watch(service string, update func([]runtime.RefAddress)) {
	d.mu.Lock()
	d.watches[service] = append(d.watches[service], update)
	delete(d.seen, service) // the new watcher hears the next read
	d.mu.Unlock()
	d.poke()
}

func (d *Directory) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Close stops renewing and withdraws this instance's entries, so the
// others drop them at their next read; ctx bounds the withdrawal. An
// instance that dies without Close has its entries lapse after the lease.
func (d *Directory) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	services := make([]string, 0, len(d.mine))
	for s := range d.mine {
		services = append(services, s)
	}
	d.mu.Unlock()
	close(d.stop)
	<-d.done
	for _, s := range services {
		if err := d.cfg.Client.HDel(ctx, d.key(s), d.cfg.Self).Err(); err != nil {
			return fmt.Errorf("directory: withdraw the entries of %q: %w", s, err)
		}
	}
	return nil
}

// Abandon stops the directory without withdrawing anything, as a killed
// instance would: its entries lapse after the lease.
func (d *Directory) Abandon() {
	d.mu.Lock()
	closed := d.closed
	d.closed = true
	d.mu.Unlock()
	if !closed {
		close(d.stop)
		<-d.done
	}
}

func (d *Directory) key(service string) string { return d.cfg.Space.Key("directory", service) }

// run renews and reads every Poll, and at once after Publish or Watch.
func (d *Directory) run() {
	defer close(d.done)
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	renewAll := true
	for {
		d.round(renewAll)
		renewAll = false
		select {
		case <-d.stop:
			return
		case <-d.kick:
		case <-t.C:
			renewAll = true
		}
	}
}

// round writes this instance's entries (all of them when renewing, else
// those changed), reads the watched services and tells the watchers of
// those that changed.
func (d *Directory) round(renewAll bool) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Poll)
	defer cancel()
	d.mu.Lock()
	writes := map[string][]string{}
	for s, paths := range d.mine {
		if renewAll || d.dirty[s] {
			writes[s] = paths
		}
	}
	clear(d.dirty)
	watched := make([]string, 0, len(d.watches))
	for s := range d.watches {
		watched = append(watched, s)
	}
	d.mu.Unlock()
	for s, paths := range writes {
		err := publishScript.Run(ctx, d.cfg.Client, []string{d.key(s)}, d.cfg.Self, d.cfg.Lease.Milliseconds(), strings.Join(paths, "\n")).Err()
		if err != nil {
			d.mu.Lock()
			d.dirty[s] = true // again at the next round
			d.mu.Unlock()
			d.cfg.Logger.Warn("directory: cannot publish this instance's registrations", "service", s, "err", err.Error())
		}
	}
	for _, s := range watched {
		others, err := d.read(ctx, s)
		if err != nil {
			d.cfg.Logger.Warn("directory: cannot read the other instances' registrations", "service", s, "err", err.Error())
			continue
		}
		d.mu.Lock()
		prev, known := d.seen[s]
		fns := slices.Clone(d.watches[s])
		d.seen[s] = others
		d.mu.Unlock()
		if !known || !slices.Equal(prev, others) {
			for _, fn := range fns {
				fn(others)
			}
		}
	}
}

// read returns the live entries of the other instances, sorted.
func (d *Directory) read(ctx context.Context, service string) ([]runtime.RefAddress, error) {
	vals, err := readScript.Run(ctx, d.cfg.Client, []string{d.key(service)}).StringSlice()
	if err != nil {
		return nil, err
	}
	var out []runtime.RefAddress
	for i := 0; i+1 < len(vals); i += 2 {
		addr := vals[i]
		if addr == d.cfg.Self {
			continue
		}
		for _, p := range strings.Split(vals[i+1], "\n") {
			if p != "" {
				out = append(out, runtime.RefAddress{Addr: addr, Path: p})
			}
		}
	}
	slices.SortFunc(out, func(a, b runtime.RefAddress) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// publishScript sets this instance's field to "<until>|<paths>", or
// removes it when there are no paths. KEYS[1] the hash; ARGV the address,
// the lease in ms, the paths.
var publishScript = redis.NewScript(`
if ARGV[3] == "" then
  redis.call("HDEL", KEYS[1], ARGV[1])
  return 0
end
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("HSET", KEYS[1], ARGV[1], (now + tonumber(ARGV[2])) .. "|" .. ARGV[3])
return 1
`)

// readScript returns the fields whose lease has not lapsed, as address,
// paths pairs, and deletes the others. KEYS[1] the hash.
var readScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call("HGETALL", KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local sep = string.find(all[i + 1], "|", 1, true)
  local untilMs = sep and tonumber(string.sub(all[i + 1], 1, sep - 1))
  if untilMs and untilMs > now then
    out[#out + 1] = all[i]
    out[#out + 1] = string.sub(all[i + 1], sep + 1)
  else
    redis.call("HDEL", KEYS[1], all[i])
  end
end
return out
`)
