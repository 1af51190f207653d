package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// A restart is not a new member: a process killed and started again at
// the same address (a container restarted in its pod, which keeps the
// pod's IP) joins under a new id and incarnation, and its predecessor's
// membership would hold its shards until its lease lapsed. With
// [Config.ReplaceSameAddr], the new incarnation deletes the predecessor's
// membership as soon as both hold:
//
//   - the predecessor is registered at exactly this member's address, and
//     this process holds that address (the caller's promise: it listens
//     there, on an address of its own machine, so the predecessor cannot
//     be listening there too); and
//   - the predecessor has stopped renewing: its last heartbeat, on Redis's
//     clock, is at least [staleAfter] old. A live member renews every
//     lease/3, so this never takes a member that renews on time, whatever
//     the address it claims.
//
// The shards it owned are then free at once (their records name an
// incarnation whose key is gone) and taken within a rebalancing poll. A
// predecessor that was alive after all finds its key gone at its next
// renewal, stops serving and joins again, as after a lapsed lease; its
// writes meanwhile are refused by the fence.

// staleAfter is how old a member's last heartbeat is when it has stopped
// renewing: half a lease, a renewal period (lease/3) and half of one more
// for its round trip.
func staleAfter(lease time.Duration) time.Duration { return lease / 2 }

// replace deletes the other members at m's address whose last heartbeat
// is at least stale old. It returns how long until the next member still
// there becomes stale (negative when none is left, or when m's own key is
// gone), and the ids it deleted.
func (m *Member) replace(ctx context.Context, stale time.Duration) (time.Duration, []string, error) {
	flat, err := replaceScript.Run(ctx, m.cfg.Client, []string{m.keys.index()}, m.keys.memberPrefix(),
		m.cfg.ID, m.inc, m.cfg.Addr, stale.Milliseconds()).StringSlice()
	if err != nil {
		return -1, nil, fmt.Errorf("cluster: replace the earlier incarnations at %s: %w", m.cfg.Addr, err)
	}
	if len(flat) == 0 || len(flat)%2 != 1 {
		return -1, nil, fmt.Errorf("cluster: replace the earlier incarnations at %s: %d values", m.cfg.Addr, len(flat))
	}
	wait, err := strconv.ParseInt(flat[0], 10, 64)
	if err != nil {
		return -1, nil, fmt.Errorf("cluster: replace the earlier incarnations at %s: wait %q: %w", m.cfg.Addr, flat[0], err)
	}
	var ids []string
	for i := 1; i < len(flat); i += 2 {
		ids = append(ids, flat[i])
		m.log.Info("cluster: replaced an earlier incarnation at this address, which had stopped renewing",
			"addr", m.cfg.Addr, "replaced", flat[i], "incarnation", flat[i+1])
	}
	if len(ids) > 0 {
		select {
		case m.replaced <- struct{}{}:
		default: // a pass is already due
		}
	}
	return time.Duration(wait) * time.Millisecond, ids, nil
}

// replaceStep runs replace once for the renewer and returns when to run
// it again: never (a negative duration) once no member is left at the
// address; on an error, at the next renewal period.
func (m *Member) replaceStep() time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Lease/3)
	defer cancel()
	wait, _, err := m.replace(ctx, staleAfter(m.cfg.Lease))
	if err != nil {
		m.log.Warn("cluster: replacing the earlier incarnations at this address failed; retrying", "err", err.Error())
		return m.cfg.Lease / 3
	}
	if wait < 0 {
		return wait
	}
	return wait + time.Millisecond // once it is surely stale
}
