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
				b.timers, b.leaseExpired = part.timers, part.leaseExpired
			} else {
				b.timers = append(b.timers, part.timers...)
				b.leaseExpired = append(b.leaseExpired, part.leaseExpired...)
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
	if err := s.readRecords(ctx, &b); err != nil {
		errs = append(errs, err)
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

// parseClaim decodes one partition's claim reply: the timers it claimed
// as their states have them (generation, due time, attempts, last attempt
// and error). The rest is in their records, which readRecords adds.
func parseClaim(res []any) (b claimBatch, markerGone bool, err error) {
	if len(res) < 3 || (len(res)-3)%3 != 0 {
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
	n := (len(res) - 3) / 3
	b.timers, b.leaseExpired = make([]Timer, 0, n), make([]bool, 0, n)
	for i := 3; i < len(res); i += 3 {
		var f [2]string
		if err := stringsInto(f[:], res[i:i+2]); err != nil {
			return claimBatch{}, false, err
		}
		t := Timer{Name: f[0]}
		if err := readState(&t, f[1]); err != nil {
			return claimBatch{}, false, err
		}
		b.timers = append(b.timers, t)
		b.leaseExpired = append(b.leaseExpired, res[i+2] == int64(1))
	}
	return b, marker == 0, nil
}

// readRecords reads the records of b's timers, in one round trip, and adds
// what only they hold: the creation time, the retries allowed and the
// call (b.calls, in its stored form). The claim script leaves them out
// because bringing a 1 KB record into Lua costs Redis more than the rest
// of a claim. A record written once per generation makes reading it
// afterwards safe: a timer whose record is gone, or of another generation,
// was deleted or replaced since it was claimed, which ended that claim,
// and it leaves the batch. A record that does not decode is removed (if
// still of the claimed generation) and named in b.corrupt.
func (s *RedisStore) readRecords(ctx context.Context, b *claimBatch) error {
	if len(b.timers) == 0 {
		return nil
	}
	groups := byPartition(len(b.timers), func(i int) string { return b.timers[i].Name })
	cmds := make(map[int]*redis.SliceCmd, len(groups))
	hmget := func(c redis.Cmdable, p int, idx []int) *redis.SliceCmd {
		names := make([]string, len(idx))
		for k, i := range idx {
			names[k] = b.timers[i].Name
		}
		return c.HMGet(ctx, s.parts[p].keys[1], names...)
	}
	if len(groups) == 1 {
		for p, idx := range groups { // most claims: one partition, no pipeline
			cmds[p] = hmget(s.client, p, idx)
		}
	} else {
		pipe := s.client.Pipeline()
		for p, idx := range groups {
			cmds[p] = hmget(pipe, p, idx)
		}
		_, _ = pipe.Exec(ctx) // each partition's error is its command's
	}
	recs := make([]any, len(b.timers))
	var errs []error
	for p, idx := range groups {
		vals, err := cmds[p].Result()
		if err == nil && len(vals) != len(idx) {
			err = fmt.Errorf("%d values for %d timers", len(vals), len(idx))
		}
		if err != nil {
			// Those claims stand: their leases will expire and the
			// timers be claimed again. The other partitions' timers run.
			errs = append(errs, fmt.Errorf("read the claimed timers' records on %s: %w", s.parts[p].keys[1], err))
			continue
		}
		for k, v := range vals {
			recs[idx[k]] = v
		}
	}
	b.calls = make([]string, 0, len(b.timers))
	var corrupt []Firing
	kept := 0
	for i, t := range b.timers {
		rec, ok := recs[i].(string)
		if !ok {
			continue // unread, or deleted since the claim
		}
		r, call, err := decodeRecordHeader(t.Name, rec)
		if err != nil {
			corrupt = append(corrupt, Firing{Name: t.Name, Generation: t.Generation})
			b.corrupt = append(b.corrupt, t.Name)
			continue
		}
		if r.Generation != t.Generation {
			continue // replaced since the claim
		}
		t.CreatedAt, t.MaxRetries = r.CreatedAt, r.MaxRetries
		b.timers[kept], b.leaseExpired[kept] = t, b.leaseExpired[i]
		b.calls = append(b.calls, call)
		kept++
	}
	b.timers, b.leaseExpired = b.timers[:kept], b.leaseExpired[:kept]
	if len(corrupt) > 0 {
		// Completing a claimed generation removes it, as the claim script
		// removes a timer whose state does not decode.
		if _, err := s.complete(ctx, corrupt); err != nil {
			errs = append(errs, fmt.Errorf("remove timers with corrupt records: %w", err))
		}
	}
	return errors.Join(errs...)
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
