package timers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis store's dead letters: per partition a hash (name → dead
// letter, layout in redisscripts.go) and a sorted set by time of death,
// which the list walks like the due sets and the pruning reads from its
// oldest end.

func (s *RedisStore) deadList(ctx context.Context, q listQuery) (_ DeadLetterPage, err error) {
	defer markUnavailable(&err)
	keys := make([]string, len(s.parts))
	for i, p := range s.parts {
		keys[i] = p.deadAt
	}
	dead, next, err := walkSets(ctx, s, keys, "+inf", q, func(names []string) ([]*DeadLetter, error) {
		ds, err := s.fetchDead(ctx, names)
		for i, d := range ds {
			if d != nil && !q.matchesTimer(d.Timer) {
				ds[i] = nil
			}
		}
		return ds, err
	})
	return DeadLetterPage{DeadLetters: dead, NextCursor: next}, err
}

// fetchDead reads the named dead letters (nil where one is gone), in one
// pipelined round.
func (s *RedisStore) fetchDead(ctx context.Context, names []string) ([]*DeadLetter, error) {
	out := make([]*DeadLetter, len(names))
	groups := byPartition(len(names), func(i int) string { return names[i] })
	pipe := s.client.Pipeline()
	reads := make(map[int]*redis.SliceCmd, len(groups))
	for p, idx := range groups {
		fields := make([]string, len(idx))
		for k, i := range idx {
			fields[k] = names[i]
		}
		reads[p] = pipe.HMGet(ctx, s.parts[p].dead, fields...)
	}
	if len(groups) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("HMGET of the dead-letter hashes: %w", err)
	}
	for p, idx := range groups {
		for k, v := range reads[p].Val() {
			rec, ok := v.(string)
			if !ok {
				continue // deleted meanwhile
			}
			d, err := decodeDead(names[idx[k]], rec)
			if err != nil {
				return nil, err
			}
			out[idx[k]] = &d
		}
	}
	return out, nil
}

// decodeDead reads a dead letter: its time of death, then its record.
func decodeDead(name, rec string) (DeadLetter, error) {
	var died [1]int64
	rest, ok := cutInts(rec, died[:])
	if !ok {
		return DeadLetter{}, fmt.Errorf("dead letter %q: corrupt record %q", name, rec[:min(len(rec), 80)])
	}
	t, err := decodeRecord(name, rest)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead letter: %w", err)
	}
	return DeadLetter{Timer: t, DiedAt: time.UnixMilli(died[0])}, nil
}

func (s *RedisStore) deadGet(ctx context.Context, name string) (_ DeadLetter, err error) {
	defer markUnavailable(&err)
	ds, err := s.fetchDead(ctx, []string{name})
	if err != nil {
		return DeadLetter{}, err
	}
	if ds[0] == nil {
		return DeadLetter{}, fmt.Errorf("dead letter %q: %w", name, ErrNotFound)
	}
	return *ds[0], nil
}

func (s *RedisStore) deadRemove(ctx context.Context, name string) (err error) {
	defer s.markWrite(&err)
	if err := deleteDeadLetter.Run(ctx, s.client, s.part(name).withDead, name).Err(); err != nil {
		return fmt.Errorf("deleteDeadLetter: %w", err)
	}
	return nil
}

// revive runs the revive script on the name's partition; the active limit
// is counted as create counts it (see create).
func (s *RedisStore) revive(ctx context.Context, name string, maxActive int) (_ Timer, err error) {
	defer s.markWrite(&err)
	home := partitionOf(name)
	p := s.parts[home]
	keys, others, err := s.limitKeys(ctx, home, append(slices.Clip(p.withDead), p.gen))
	if err != nil {
		return Timer{}, err
	}
	res, err := reviveDeadLetter.Run(ctx, s.client, keys,
		s.now(true), maxActive, name, s.channel, others, home).Slice()
	s.plan.expect(home, s.clock().Now())
	if err != nil {
		return Timer{}, fmt.Errorf("reviveDeadLetter: %w", err)
	}
	if len(res) == 1 {
		switch res[0] {
		case "missing":
			return Timer{}, fmt.Errorf("dead letter %q: %w", name, ErrNotFound)
		case "exists":
			return Timer{}, fmt.Errorf("dead letter %q: %w", name, ErrNameTaken)
		}
	}
	t, err := parseCreated(res, maxActive)
	if err != nil {
		return Timer{}, fmt.Errorf("reviveDeadLetter: %w", err)
	}
	f, err := stringFields(res, 6)
	if err != nil {
		return Timer{}, fmt.Errorf("reviveDeadLetter: %w", err)
	}
	t.Name = name
	if t.MaxRetries, err = strconv.Atoi(f[4]); err != nil {
		return Timer{}, fmt.Errorf("reviveDeadLetter: maxRetries %q: %w", f[4], err)
	}
	if _, t.Call, t.TraceContext, err = decodeStored(f[5]); err != nil {
		return Timer{}, fmt.Errorf("dead letter %q: stored call: %w", name, err)
	}
	return t, nil
}

func (s *RedisStore) prune(ctx context.Context, retention time.Duration, max int) (_ int, more bool, err error) {
	defer markUnavailable(&err)
	calls := make([]scriptCall, len(s.parts))
	for i, p := range s.parts {
		calls[i] = scriptCall{keys: p.withDead, args: []any{s.now(false), durMs(retention), max}}
	}
	cmds, err := evalEach(ctx, s.client, pruneDeadLetters, calls)
	if err != nil {
		return 0, false, fmt.Errorf("pruneDeadLetters: %w", err)
	}
	n := 0
	for _, c := range cmds {
		k, err := c.Int()
		if err != nil {
			return n, false, fmt.Errorf("pruneDeadLetters: %w", err)
		}
		n += k
		more = more || k == max
	}
	return n, more, nil
}
