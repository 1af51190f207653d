package timers

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

func (s *RedisStore) advance(ctx context.Context, as []advanceRequest) (_ []advanceOutcome, err error) {
	defer markUnavailable(&err)
	fs := make([]Firing, len(as))
	for i, a := range as {
		fs[i] = a.firing
	}
	res, err := s.settleEach(ctx, advanceRecurringTimers, fs, []any{s.now(false)}, func(args []any, i int) []any {
		a := as[i]
		attempt, due, spec := "", "", ""
		if a.checkAttempt {
			attempt = strconv.Itoa(a.firing.Attempt)
		}
		if a.next != nil {
			due, spec = strconv.FormatInt(ceilMs(a.due), 10), encodeRecurrence(a.next)
		}
		return append(args, a.firing.Name, a.firing.Generation, attempt, due, spec, a.dead, truncateError(a.err))
	})
	// After the write, and even after an error (it may have happened):
	// see claimPlan.
	for _, a := range as {
		if a.next != nil {
			s.plan.expect(partitionOf(a.firing.Name), a.due)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("advanceRecurringTimers: %w", err)
	}
	out := make([]advanceOutcome, len(res))
	for i, v := range res {
		out[i] = advanceOutcome(v)
	}
	return out, nil
}

func (s *RedisStore) putDead(ctx context.Context, d DeadLetter) (err error) {
	defer s.markWrite(&err)
	call, err := encodeCall(d.Call)
	if err != nil {
		return fmt.Errorf("encode call: %w", err)
	}
	last := int64(0)
	if !d.LastAttemptAt.IsZero() {
		last = d.LastAttemptAt.UnixMilli()
	}
	if err := putDeadLetter.Run(ctx, s.client, s.part(d.Name).settle, d.Name, d.CreatedAt.UnixMilli(), d.MaxRetries,
		d.DueAt.UnixMilli(), d.Attempts, last, d.LastError, call, d.DiedAt.UnixMilli()).Err(); err != nil {
		return fmt.Errorf("putDeadLetter: %w", err)
	}
	return nil
}

// legacyScan is how many fields one HSCAN of the legacy hash asks for.
const legacyScan = 500

// scanLegacy calls use with every timer of the legacy key layout: the
// records of <prefix>:timers:data, with their due time from
// <prefix>:timers:due when it is there (a record's own when not).
func (s *RedisStore) scanLegacy(ctx context.Context, use func(Timer) error) (err error) {
	defer markUnavailable(&err)
	data, due := s.keys.Key("timers", "data"), s.keys.Key("timers", "due")
	var cursor uint64
	for {
		kv, next, err := s.client.HScan(ctx, data, cursor, "*", legacyScan).Result()
		if err != nil {
			return fmt.Errorf("HSCAN %s: %w", data, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			t, err := decodeRecord(kv[i], kv[i+1])
			if err != nil {
				return err
			}
			if score, err := s.client.ZScore(ctx, due, kv[i]).Result(); err == nil && int64(score) > t.DueAt.UnixMilli() {
				t.DueAt = time.UnixMilli(int64(score)) // a lease the old version held: due when it ends
			}
			if err := use(t); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
