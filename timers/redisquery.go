package timers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The admin queries on Redis. They read with plain commands, a chunk at a
// time, not in one script: a walk over 50,000 timers must not hold Redis
// (and every instance's claims) for its whole length. Each chunk is
// consistent; a walk as a whole is as [Page] documents.
//
// A list merges the partitions: each partition's sorted set is in run
// order, (score, name), so the walk reads each as a stream, a chunk at a
// time, and always takes the smallest head of all. The cursor is a
// position in that order, so it is the same for one partition or sixteen.

// listChunk is the most sorted-set entries one ZRANGE reads.
const listChunk = 500

// listBudget is how many entries one List call examines at most before it
// returns a (possibly short) page and a cursor.
func listBudget(limit int) int { return max(10*limit, 5000) }

// stream is one partition's part of a walk.
type stream struct {
	key string
	// The next read starts at score from (none: -inf), skipping the skip
	// entries of that score read already. Seeking by score rather than
	// by offset from the start keeps a read correct when entries before
	// it are removed meanwhile.
	from    int64
	hasFrom bool
	skip    int
	buf     []position
	done    bool // the partition has nothing after buf
}

func (st *stream) head() (position, bool) {
	if len(st.buf) == 0 {
		return position{}, false
	}
	return st.buf[0], true
}

// read queues the next chunk of st on pipe; take applies its result.
func (st *stream) read(ctx context.Context, pipe redis.Pipeliner, maxScore string, count int) *redis.ZSliceCmd {
	minScore := "-inf"
	if st.hasFrom {
		minScore = strconv.FormatInt(st.from, 10)
	}
	return pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: st.key, Start: minScore, Stop: maxScore, ByScore: true, Offset: int64(st.skip), Count: int64(count),
	})
}

func (st *stream) take(zs []redis.Z, count int) {
	for _, z := range zs {
		p := position{score: int64(z.Score), name: z.Member.(string)}
		st.buf = append(st.buf, p)
		if st.hasFrom && p.score == st.from {
			st.skip++
		} else {
			st.from, st.hasFrom, st.skip = p.score, true, 1
		}
	}
	st.done = len(zs) < count
}

func (s *RedisStore) list(ctx context.Context, q listQuery) (_ Page, err error) {
	defer markUnavailable(&err)
	maxScore := "+inf"
	if q.upcoming > 0 {
		now, err := s.nowMs(ctx)
		if err != nil {
			return Page{}, err
		}
		maxScore = strconv.FormatInt(now+durMs(q.upcoming), 10)
	}
	keys := make([]string, len(s.parts))
	for i, p := range s.parts {
		keys[i] = p.keys[0]
	}
	timers, next, err := walkSets(ctx, s, keys, maxScore, q, func(names []string) ([]*Timer, error) {
		ts, err := s.fetch(ctx, names, q.failing)
		for i, t := range ts {
			if t != nil && !q.matchesTimer(*t) {
				ts[i] = nil
			}
		}
		return ts, err
	})
	return Page{Timers: timers, NextCursor: next}, err
}

// walkSets is one page of a merged walk over the sorted sets keys (one per
// partition, each in (score, name) order) up to maxScore, from q's cursor,
// keeping the names q matches: fetch reads a batch of them, nil where one
// is gone or does not match. It returns the page and the next cursor.
func walkSets[T any](ctx context.Context, s *RedisStore, keys []string, maxScore string, q listQuery,
	fetch func(names []string) ([]*T, error),
) ([]T, string, error) {
	streams := make([]*stream, len(keys))
	for i, k := range keys {
		streams[i] = &stream{key: k, from: q.after.score, hasFrom: q.hasAfter}
	}
	chunk := min(listChunk, max(16, 2*q.limit/len(streams)))
	// refill reads the next chunk of every stream that ran dry, at once.
	refill := func() error {
		var pipe redis.Pipeliner
		reads := map[*stream]*redis.ZSliceCmd{}
		for _, st := range streams {
			if len(st.buf) == 0 && !st.done {
				if pipe == nil {
					pipe = s.client.Pipeline()
				}
				reads[st] = st.read(ctx, pipe, maxScore, chunk)
			}
		}
		if pipe == nil {
			return nil
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("ZRANGE of %s…: %w", keys[0], err)
		}
		for st, cmd := range reads {
			st.take(cmd.Val(), chunk)
		}
		return nil
	}

	var page []T
	var next string
	var pending []position // matching names whose records are not read yet
	// flush reads the pending items and adds those that match; it
	// reports whether the page is full, with its cursor set.
	flush := func(more bool) (bool, error) {
		names := make([]string, len(pending))
		for i, p := range pending {
			names[i] = p.name
		}
		items, err := fetch(names)
		if err != nil {
			return false, err
		}
		for i, it := range items {
			if it == nil {
				continue
			}
			page = append(page, *it)
			if len(page) == q.limit {
				if more || i < len(items)-1 {
					next = encodeCursor(pending[i])
				}
				pending = pending[:0]
				return true, nil
			}
		}
		pending = pending[:0]
		return false, nil
	}

	budget := listBudget(q.limit)
	var last position
	for examined := 0; examined < budget; examined++ {
		if err := refill(); err != nil {
			return nil, "", err
		}
		var st *stream
		var p position
		for _, cand := range streams {
			if h, ok := cand.head(); ok && (st == nil || h.less(p)) {
				st, p = cand, h
			}
		}
		if st == nil {
			_, err := flush(false) // the end of every partition
			return page, next, err
		}
		st.buf = st.buf[1:]
		last = p
		if (q.hasAfter && !q.after.less(p)) || !q.matchesName(p.name) {
			continue
		}
		pending = append(pending, p)
		if len(pending) >= max(q.limit-len(page), 64) {
			if full, err := flush(true); full || err != nil {
				return page, next, err
			}
		}
	}
	if full, err := flush(true); full || err != nil {
		return page, next, err
	}
	return page, encodeCursor(last), nil
}

// fetch reads the named timers (nil where one vanished meanwhile), one
// pipelined round per step over the partitions involved. With onlyFailing
// it first asks the failing sets, so that a filtered walk does not read
// the 1 KB records of every healthy timer.
func (s *RedisStore) fetch(ctx context.Context, names []string, onlyFailing bool) ([]*Timer, error) {
	out := make([]*Timer, len(names))
	groups := byPartition(len(names), func(i int) string { return names[i] })
	if onlyFailing {
		pipe := s.client.Pipeline()
		checks := make(map[int]*redis.BoolSliceCmd, len(groups))
		for p, idx := range groups {
			members := make([]any, len(idx))
			for k, i := range idx {
				members[k] = names[i]
			}
			checks[p] = pipe.SMIsMember(ctx, s.parts[p].keys[2], members...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("SMISMEMBER of the failing sets: %w", err)
		}
		for p, idx := range groups {
			var failing []int
			for k, is := range checks[p].Val() {
				if is {
					failing = append(failing, idx[k])
				}
			}
			if len(failing) == 0 {
				delete(groups, p)
			} else {
				groups[p] = failing
			}
		}
	}
	if len(groups) == 0 {
		return out, nil
	}
	// A state read after its record may be of a newer generation (the
	// timer was replaced in between): applyState then ignores it.
	pipe := s.client.Pipeline()
	reads := make(map[int]*redis.SliceCmd, len(groups))
	states := make(map[int]*redis.SliceCmd, len(groups))
	for p, idx := range groups {
		fields := make([]string, len(idx))
		for k, i := range idx {
			fields[k] = names[i]
		}
		reads[p] = pipe.HMGet(ctx, s.parts[p].keys[1], fields...)
		states[p] = pipe.HMGet(ctx, s.parts[p].keys[3], fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("HMGET of the data and state hashes: %w", err)
	}
	for p, idx := range groups {
		st := states[p].Val()
		for k, v := range reads[p].Val() {
			rec, ok := v.(string)
			if !ok {
				continue // deleted between the two reads
			}
			t, err := decodeRecord(names[idx[k]], rec)
			if err != nil {
				return nil, err
			}
			if state, ok := st[k].(string); ok {
				if err := applyState(&t, state); err != nil {
					return nil, err
				}
			}
			out[idx[k]] = &t
		}
	}
	return out, nil
}

// nowMs is the store's "now": the injected clock or Redis TIME.
func (s *RedisStore) nowMs(ctx context.Context) (int64, error) {
	if s.clk != nil {
		return floorMs(s.clk.Now()), nil
	}
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redis TIME: %w", err)
	}
	return floorMs(t), nil
}

// stats sums the partitions' counts, each read at one instant of its own.
func (s *RedisStore) stats(ctx context.Context) (_ storeStats, err error) {
	defer markUnavailable(&err)
	calls := make([]scriptCall, len(s.parts))
	for i, p := range s.parts {
		calls[i] = scriptCall{keys: p.withDead, args: []any{s.now(false), time.Minute.Milliseconds()}}
	}
	cmds, err := evalEach(ctx, s.client, countTimers, calls)
	if err != nil {
		return storeStats{}, fmt.Errorf("countTimers: %w", err)
	}
	var st storeStats
	for _, c := range cmds {
		res, err := c.Int64Slice()
		if err != nil || len(res) != 4 {
			return storeStats{}, errors.Join(errors.New("countTimers: unexpected reply"), err)
		}
		st.active += int(res[0])
		st.failing += int(res[1])
		st.dueWithin1m += int(res[2])
		st.dead += int(res[3])
	}
	return st, nil
}
