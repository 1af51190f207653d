package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/internal/keyspace"
)

// ErrIDLive is returned by [Join] when a live member already has the id.
var ErrIDLive = errors.New("cluster: a live member already has this id")

// ErrGone is wrapped by an operation of a member whose membership is gone
// from Redis: its lease lapsed, and the others took its shards.
var ErrGone = errors.New("the membership is gone (its lease lapsed)")

// Member is a joined instance: its registration in Redis, the renewer that
// keeps it alive, and its own view of its lease.
type Member struct {
	cfg   Config
	keys  keys
	inc   string // this incarnation's token, drawn at Join
	lease *Lease
	log   *slog.Logger
	renew *renewer
	// replaced gets a value when this member replaced an earlier
	// incarnation at its address (sameaddr.go): its rebalancer passes at
	// once rather than at its next tick.
	replaced chan struct{}
}

// MemberInfo is one live member as Redis holds it.
type MemberInfo struct {
	ID          string
	Addr        string
	Incarnation string
	// Heartbeat is when Redis accepted the member's last renewal (Redis's
	// clock).
	Heartbeat time.Time
	// Leaving: the member is handing its shards over ([Member.Drain]);
	// no one should give it more.
	Leaving bool
}

// Join registers an instance as a member with a fresh incarnation and
// starts renewing its lease every Lease/3. It fails with ErrBadConfig
// saying what is wrong, with ErrIDLive when the id is taken, or with the
// Redis error. The member acts for shards only while [Member.Lease] is
// valid; call [Member.Leave] to go.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := &Member{
		cfg:      cfg,
		keys:     keys{keyspace.Must(cfg.Prefix)},
		inc:      uuid.NewString(),
		lease:    newLease(cfg.Clock, cfg.Lease, cfg.Margin),
		log:      cfg.Logger.With("member", cfg.ID),
		replaced: make(chan struct{}, 1),
	}
	m.renew = newRenewer(m)
	sent := cfg.Clock.Now()
	ok, err := joinScript.Run(ctx, cfg.Client, []string{m.keys.member(cfg.ID), m.keys.index()},
		cfg.ID, m.inc, cfg.Addr, cfg.Lease.Milliseconds()).Bool()
	if err != nil {
		return nil, fmt.Errorf("cluster: join %s: %w", cfg.ID, err)
	}
	if !ok {
		return nil, fmt.Errorf("cluster: join %s: %w (wait for its lease of %v to expire, or use another id)",
			cfg.ID, ErrIDLive, cfg.Lease)
	}
	m.lease.renewed(sent)
	m.log.Info("cluster: joined", "addr", cfg.Addr, "incarnation", m.inc, "lease_ms", cfg.Lease.Milliseconds())
	m.renew.start()
	m.announce(ctx)
	return m, nil
}

// ID returns the member's id.
func (m *Member) ID() string { return m.cfg.ID }

// Addr returns the member's advertised transport address.
func (m *Member) Addr() string { return m.cfg.Addr }

// Incarnation returns the token drawn at Join that shard records name.
func (m *Member) Incarnation() string { return m.inc }

// Lease returns the member's view of its own lease.
func (m *Member) Lease() *Lease { return m.lease }

// Lost is closed when a renewal found the member's key gone (its lease
// expired in Redis): the incarnation is dead for good, and the instance
// must Join again (a new incarnation) to serve.
func (m *Member) Lost() <-chan struct{} { return m.renew.lost }

// stopRenewing stops the renewer and waits for it, leaving the key and
// the local lease to run out by themselves: what a crash does.
func (m *Member) stopRenewing() { m.renew.shutdown() }

// Abandon stops the renewer and stops serving at once, and tells Redis
// nothing: the member's key expires by itself after the lease, and its
// shard records name it until the others take them over then. It is
// what a crash does; a test kit kills an instance this way.
func (m *Member) Abandon() {
	m.stopRenewing()
	m.lease.revoke()
}

// Leave stops the renewer, stops serving, then deletes the member's key
// (if it is still this incarnation's). Shards the member still owns are
// taken over by others at once, since its key is gone: release them first
// ([Rebalancer.Leave] does). Leaving twice is harmless.
func (m *Member) Leave(ctx context.Context) error {
	m.stopRenewing()
	m.lease.revoke() // before the key goes: never serve past it
	err := leaveScript.Run(ctx, m.cfg.Client, []string{m.keys.member(m.cfg.ID), m.keys.index()},
		m.cfg.ID, m.inc).Err()
	if err != nil {
		return fmt.Errorf("cluster: leave %s: %w", m.cfg.ID, err)
	}
	m.announce(ctx)
	m.log.Info("cluster: left")
	return nil
}

// Members lists the live members (one script on the members' slot; ids
// whose key expired are dropped from the index on the way).
func (m *Member) Members(ctx context.Context) ([]MemberInfo, error) {
	flat, err := membersScript.Run(ctx, m.cfg.Client, []string{m.keys.index()}, m.keys.memberPrefix()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("cluster: list members: %w", err)
	}
	const fields = 5 // id, addr, inc, beat, leaving
	if len(flat)%fields != 0 {
		return nil, fmt.Errorf("cluster: list members: %d values, not %d per member", len(flat), fields)
	}
	out := make([]MemberInfo, 0, len(flat)/fields)
	for i := 0; i < len(flat); i += fields {
		ms, err := strconv.ParseInt(flat[i+3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cluster: list members: member %s: heartbeat %q: %w", flat[i], flat[i+3], err)
		}
		out = append(out, MemberInfo{ID: flat[i], Addr: flat[i+1], Incarnation: flat[i+2],
			Heartbeat: time.UnixMilli(ms), Leaving: flat[i+4] == "1"})
	}
	return out, nil
}

// Drain marks the member as leaving in Redis: the others stop preferring
// it ([Assign] leaves it out) and take each shard as soon as it releases
// it, instead of after it has left. It still owns, and serves, what it
// has not released.
func (m *Member) Drain(ctx context.Context) error {
	ok, err := drainScript.Run(ctx, m.cfg.Client, []string{m.keys.member(m.cfg.ID)}, m.inc).Bool()
	if err != nil {
		return fmt.Errorf("cluster: drain %s: %w", m.cfg.ID, err)
	}
	if !ok {
		return fmt.Errorf("cluster: drain %s: %w", m.cfg.ID, ErrGone)
	}
	m.announce(ctx)
	return nil
}
