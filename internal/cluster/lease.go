package cluster

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Lease is an instance's own view of its membership lease: whether it is
// surely still alive in Redis, so that the instance may act for its
// shards (answer reads included).
//
// It counts from when the instance SENT the last renewal that Redis
// accepted, on the local monotonic clock, and trusts only
// lease×0.9 − margin of it: Redis counted its full lease from when it
// received that renewal, later, so the local view ends first even if the
// local clock runs up to 10 % slow against Redis's. Past that, Valid is
// false until a renewal is accepted again.
//
// A Lease is safe for concurrent use.
type Lease struct {
	clock  clockwork.Clock
	window time.Duration // how long after a renewal was sent it is trusted

	mu    sync.Mutex
	until time.Time // the end of the trusted window; zero: never valid
	last  time.Time // when the last accepted renewal was sent; zero: none yet
}

// window is the part of a lease an owner trusts: lease×0.9 − margin.
func window(lease, margin time.Duration) time.Duration {
	return lease/10*9 - margin
}

// newLease returns a Lease that is not valid until its first renewal.
func newLease(clock clockwork.Clock, lease, margin time.Duration) *Lease {
	return &Lease{clock: clock, window: window(lease, margin)}
}

// renewed records that Redis accepted a renewal sent at sent (a reading of
// the Lease's clock taken before sending). A late answer to an older
// renewal never shortens the window.
func (l *Lease) renewed(sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := sent.Add(l.window); until.After(l.until) {
		l.until = until
	}
	if sent.After(l.last) {
		l.last = sent
	}
}

// revoke ends the window now: the member left or its key is gone.
func (l *Lease) revoke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = time.Time{}
}

// Valid reports whether the lease is surely alive at now, a reading of
// the Lease's clock.
func (l *Lease) Valid(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Before(l.until)
}

// Serving reports whether the lease is surely alive now: whether the
// instance may act for the shards it owns.
func (l *Lease) Serving() bool { return l.Valid(l.clock.Now()) }

// Until is the end of the trusted window (zero when not valid yet or
// revoked), for logs and metrics.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// LastRenewal is when the last renewal that Redis accepted was sent (the
// join counts as one), on the Lease's clock; zero before the first. It
// survives revoke: it is what an operator asks "how long since this
// member's last heartbeat".
func (l *Lease) LastRenewal() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// SinceRenewal is how long ago, on the Lease's clock, the last accepted
// renewal was sent; 0 before the first.
func (l *Lease) SinceRenewal() time.Duration {
	last := l.LastRenewal()
	if last.IsZero() {
		return 0
	}
	return l.clock.Since(last)
}
