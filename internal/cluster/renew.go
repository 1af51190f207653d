package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// renewer is a member's background loop: it renews the lease every
// Lease/3, and records each accepted renewal in the member's Lease, counted
// from when it was sent. A renewal that gets no answer (Redis unreachable)
// is tried again at the next tick; meanwhile the Lease runs out by itself
// and the member stops serving. A renewal that finds the key gone ends the
// loop: the incarnation is dead for good, and lost is closed.
type renewer struct {
	m *Member

	failures atomic.Int64 // renewals that got no answer, for logs and tests

	stopOnce sync.Once
	stop     chan struct{} // closed to stop the loop
	done     chan struct{} // closed when the loop has returned
	lost     chan struct{} // closed when the key was found gone
}

func newRenewer(m *Member) *renewer {
	return &renewer{m: m, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
}

// start starts the loop; call it once.
func (r *renewer) start() { go r.run() }

// shutdown stops the loop and waits for it (a renewal in flight ends
// within Lease/3). It leaves the Lease as it is. Safe to call twice.
func (r *renewer) shutdown() {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
}

func (r *renewer) run() {
	defer close(r.done)
	tick := r.m.cfg.Clock.NewTicker(r.m.cfg.Lease / 3)
	defer tick.Stop()
	// With ReplaceSameAddr, the earlier incarnations at this address are
	// replaced at once if stale, else each once it is (sameaddr.go).
	var replace <-chan time.Time // nil: nothing (more) to replace
	var timer clockwork.Timer
	if r.m.cfg.ReplaceSameAddr {
		timer = r.m.cfg.Clock.NewTimer(0)
		defer timer.Stop()
		replace = timer.Chan()
	}
	for {
		select {
		case <-r.stop:
			return
		case <-replace:
			if d := r.m.replaceStep(); d >= 0 {
				timer.Reset(d)
			} else {
				replace = nil
			}
		case <-tick.Chan():
			if !r.renewOnce() {
				return
			}
		}
	}
}

// renewOnce sends one renewal; false when the key is gone.
func (r *renewer) renewOnce() bool {
	m := r.m
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Lease/3)
	defer cancel()
	sent := m.cfg.Clock.Now()
	ok, err := renewScript.Run(ctx, m.cfg.Client, []string{m.keys.member(m.cfg.ID)},
		m.inc, m.cfg.Lease.Milliseconds()).Bool()
	switch {
	case err != nil:
		m.log.Warn("cluster: lease renewal failed; retrying", "err", err.Error(),
			"failures", r.failures.Add(1), "serving", m.lease.Serving())
		return true
	case !ok:
		m.lease.revoke()
		close(r.lost)
		m.log.Error("cluster: membership lost: the lease expired in Redis; join again to serve",
			"incarnation", m.inc)
		return false
	}
	m.lease.renewed(sent)
	return true
}
