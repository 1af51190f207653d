package timers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis store's side of running timers: claiming due timers from the
// partitions, and settling the outcomes (complete, fail, release), each a
// script per partition involved, pipelined.

// claimShare is the fewest timers a claim asks one partition for, while
// its most allows: see claim.
const claimShare = 64

// claim takes up to most due timers from the partitions that may have
// some due (see claimPlan; every partition at least once a second). A
// round runs the claim script on some of those partitions in one
// pipeline, with most split between them (the first ones get one more),
// so the loop never gets more timers than it has workers for. A round asks
// no more partitions than give each a share of at least claimShare: a
// script call costs Redis as much as a few timers do, so a burst is taken
// a large batch at a time from few partitions rather than a few timers
// from each. The partitions start in a rotating order, so that every one
// comes first in turn. The partitions a round left out, and those that
// still have timers due after it (their share was smaller than what they
// had due), are asked in the next round for what is left of most, until
// most is reached or nothing is due: like one Redis, the store hands out
// min(most, due). Every partition asked reports its earliest time and its
// marker.
//
// A partition that fails (its master is down, or failing over) does not
// cost the others their claims: the batch holds what the other partitions
// gave, with the error, so the loop runs those timers instead of leaving
// them leased to nobody until the lease ends. After a round with a
// failure, only the partitions that answered it are asked again: a dead
// master can cost a round the client's retries, and the partitions not
// yet asked are left to the next claim rather than risked on another
// such round.
func (s *RedisStore) claim(ctx context.Context, most int, lease time.Duration) (_ claimBatch, err error) {
	defer markUnavailable(&err)
	n := len(s.parts)
	clk := s.clock()
	ask, seen := s.plan.round(clk.Now())
	// The rotation makes every partition first in turn, so that none
	// waits behind the others in a burst.
	rot := int(s.nextClaim.Add(1)) % max(len(ask), 1)
	ask, seen = slices.Concat(ask[rot:], ask[:rot]), slices.Concat(seen[rot:], seen[:rot])
	b := claimBatch{}
	var errs []error
	// Each partition asked either gives its whole share (at least
	// claimShare timers, or all that is left of most) or has nothing more
	// due and is not asked again, so the rounds are bounded; the bound
	// only guards against a surprise.
	for round := 0; round <= n+most/claimShare+1 && len(ask) > 0; round++ {
		remaining := most - len(b.timers)
		k := min(len(ask), max((remaining+claimShare-1)/claimShare, 1))
		calls := make([]scriptCall, k)
		for j, i := range ask[:k] {
			quota := remaining / k
			if j < remaining%k {
				quota++
			}
			p := s.parts[i]
			calls[j] = scriptCall{keys: append(slices.Clip(p.keys), p.marker),
				args: []any{s.now(false), quota, max64(durMs(lease), 1)}}
		}
		sent := clk.Now()
		cmds, _ := evalEach(ctx, s.client, claimDueTimers, calls)
		var again []int
		var againSeen []uint64
		for j, c := range cmds {
			i := ask[j]
			res, err := c.Slice()
			var part claimBatch
			var markerGone bool
			if err == nil {
				part, markerGone, err = parseClaim(res)
			}
			if err != nil {
				// A reply that does not parse leaves its claims standing;
				// their leases will expire and the timers be claimed again.
				errs = append(errs, fmt.Errorf("claimDueTimers on %s: %w", s.parts[i].keys[0], err))
				s.plan.touch(i) // ask it again next time
				continue
			}
			// The earliest partition time: lateness is then never
			// overstated by a master whose clock is ahead.
			if b.now.IsZero() || part.now.Before(b.now) {
				b.now = part.now
			}
			if markerGone && !slices.Contains(b.wiped, s.parts[i].marker) {
				b.wiped = append(b.wiped, s.parts[i].marker)
			}
			s.plan.report(i, seen[j], sent, part.wait)
			if len(b.timers) == 0 {
				// Most rounds ask one partition: its slices are the batch's.
				b.timers, b.leaseExpired, b.calls = part.timers, part.leaseExpired, part.calls
			} else {
				b.timers = append(b.timers, part.timers...)
				b.leaseExpired = append(b.leaseExpired, part.leaseExpired...)
				b.calls = append(b.calls, part.calls...)
			}
			if part.wait == 0 {
				again, againSeen = append(again, i), append(againSeen, seen[j])
			}
		}
		if len(b.timers) >= most {
			break
		}
		if len(errs) > 0 {
			ask, seen = again, againSeen
			continue
		}
		// Those left out first: they have not been asked at all yet.
		ask, seen = slices.Concat(ask[k:], again), slices.Concat(seen[k:], againSeen)
	}
	b.wait = s.plan.wait(clk.Now())
	if len(b.wiped) > 0 && len(b.wiped) < n {
		// A round that asked only some partitions names all that lost
		// their marker, so that the wipe is reported whole at once.
		if gone, err := s.missingMarkers(ctx); err == nil {
			b.wiped = gone
		}
	}
	return b, errors.Join(errs...)
}

// missingMarkers names the partitions' markers that do not exist.
func (s *RedisStore) missingMarkers(ctx context.Context) ([]string, error) {
	pipe := s.client.Pipeline()
	cmds := make([]*redis.IntCmd, len(s.parts))
	for i, p := range s.parts {
		cmds[i] = pipe.Exists(ctx, p.marker)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var gone []string
	for i, c := range cmds {
		if c.Val() == 0 {
			gone = append(gone, s.parts[i].marker)
		}
	}
	return gone, nil
}

// parseClaim decodes one partition's claim reply.
func parseClaim(res []any) (b claimBatch, markerGone bool, err error) {
	if len(res) < 3 || (len(res)-3)%4 != 0 {
		return claimBatch{}, false, fmt.Errorf("unexpected reply of %d values", len(res))
	}
	head, err := stringFields(res[:2], 2)
	if err != nil {
		return claimBatch{}, false, err
	}
	now, err1 := strconv.ParseInt(head[0], 10, 64)
	wait, err2 := strconv.ParseInt(head[1], 10, 64)
	marker, ok := res[2].(int64)
	if err := errors.Join(err1, err2); err != nil || !ok {
		return claimBatch{}, false, fmt.Errorf("unexpected reply head %v", res[:3])
	}
	b = claimBatch{now: time.UnixMilli(now), wait: time.Duration(wait) * time.Millisecond}
	if wait < 0 {
		b.wait = -1
	}
	n := (len(res) - 3) / 4
	b.timers, b.calls, b.leaseExpired = make([]Timer, 0, n), make([]string, 0, n), make([]bool, 0, n)
	for i := 3; i < len(res); i += 4 {
		var f [3]string
		if err := stringsInto(f[:], res[i:i+3]); err != nil {
			return claimBatch{}, false, err
		}
		t, call, err := decodeRecordHeader(f[0], f[1])
		if err == nil {
			err = applyState(&t, f[2])
		}
		if err != nil {
			return claimBatch{}, false, err
		}
		b.timers = append(b.timers, t)
		b.calls = append(b.calls, call)
		b.leaseExpired = append(b.leaseExpired, res[i+3] == int64(1))
	}
	return b, marker == 0, nil
}

// settleEach runs script once per partition that has any of fs, with the
// arguments each firing adds (args appends them to a, after the script's
// leading args), and returns the script's per-firing integers in the
// order of fs.
func (s *RedisStore) settleEach(ctx context.Context, script *redis.Script, fs []Firing, lead []any, args func(a []any, i int) []any) ([]int64, error) {
	groups := byPartition(len(fs), func(i int) string { return fs[i].Name })
	order := make([]int, 0, len(groups))
	for p := range groups {
		order = append(order, p)
	}
	slices.Sort(order)
	calls := make([]scriptCall, len(order))
	for j, p := range order {
		a := slices.Clone(lead)
		for _, i := range groups[p] {
			a = args(a, i)
		}
		calls[j] = scriptCall{keys: s.parts[p].settle, args: a}
	}
	cmds, err := evalEach(ctx, s.client, script, calls)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(fs))
	for j, p := range order {
		vals, err := cmds[j].Int64Slice()
		if err != nil {
			return nil, err
		}
		if len(vals) != len(groups[p]) {
			return nil, fmt.Errorf("reply of %d values for %d timers", len(vals), len(groups[p]))
		}
		for k, i := range groups[p] {
			out[i] = vals[k]
		}
	}
	return out, nil
}

func (s *RedisStore) complete(ctx context.Context, fs []Firing) (_ []bool, err error) {
	defer markUnavailable(&err)
	res, err := s.settleEach(ctx, completeTimers, fs, nil, func(a []any, i int) []any {
		return append(a, fs[i].Name, fs[i].Generation)
	})
	if err != nil {
		return nil, fmt.Errorf("completeTimers: %w", err)
	}
	ok := make([]bool, len(res))
	for i, v := range res {
		ok[i] = v == 1
	}
	return ok, nil
}

func (s *RedisStore) fail(ctx context.Context, fails []failure) (_ []failOutcome, err error) {
	defer markUnavailable(&err)
	fs := make([]Firing, len(fails))
	for i, f := range fails {
		fs[i] = f.firing
	}
	now := s.clock().Now()
	res, err := s.settleEach(ctx, rescheduleFailedTimers, fs, []any{s.now(false)}, func(a []any, i int) []any {
		f := fails[i]
		after := int64(-1)
		if !f.giveUp {
			after = durMs(f.retryAfter)
		}
		return append(a, f.firing.Name, f.firing.Generation, f.firing.Attempt, after, truncateError(f.err))
	})
	// After the write, and even after an error (it may have happened):
	// see claimPlan.
	for _, f := range fails {
		s.plan.expect(partitionOf(f.firing.Name), now.Add(f.retryAfter))
	}
	if err != nil {
		return nil, fmt.Errorf("rescheduleFailedTimers: %w", err)
	}
	out := make([]failOutcome, len(res))
	for i, v := range res {
		out[i] = failOutcome(v)
	}
	return out, nil
}

func (s *RedisStore) release(ctx context.Context, fs []Firing) (err error) {
	defer markUnavailable(&err)
	_, err = s.settleEach(ctx, releaseTimers, fs, []any{s.now(false)}, func(a []any, i int) []any {
		return append(a, fs[i].Name, fs[i].Generation, fs[i].Attempt)
	})
	// After the write, and even after an error (it may have happened):
	// see claimPlan.
	for _, f := range fs {
		s.plan.touch(partitionOf(f.Name))
	}
	if err != nil {
		return fmt.Errorf("releaseTimers: %w", err)
	}
	return nil
}
