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
	streams := make([]*stream, len(s.parts))
	for i, p := range s.parts {
		streams[i] = &stream{key: p.keys[0], from: q.after.score, hasFrom: q.hasAfter}
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
			return fmt.Errorf("ZRANGE of the due sets: %w", err)
		}
		for st, cmd := range reads {
			st.take(cmd.Val(), chunk)
		}
		return nil
	}

	var page Page
	var pending []position // matching names whose records are not read yet
	// flush reads the pending timers and adds those that match; it
	// reports whether the page is full, with its cursor set.
	flush := func(more bool) (bool, error) {
		names := make([]string, len(pending))
		for i, p := range pending {
			names[i] = p.name
		}
		timers, err := s.fetch(ctx, names, q.failing)
		if err != nil {
			return false, err
		}
		for i, t := range timers {
			if t == nil || !q.matchesTimer(*t) {
				continue
			}
			page.Timers = append(page.Timers, *t)
			if len(page.Timers) == q.limit {
				if more || i < len(timers)-1 {
					page.NextCursor = encodeCursor(pending[i])
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
			return Page{}, err
		}
		var next *stream
		var p position
		for _, st := range streams {
			if h, ok := st.head(); ok && (next == nil || h.less(p)) {
				next, p = st, h
			}
		}
		if next == nil {
			_, err := flush(false) // the end of every partition
			return page, err
		}
		next.buf = next.buf[1:]
		last = p
		if (q.hasAfter && !q.after.less(p)) || !q.matchesName(p.name) {
			continue
		}
		pending = append(pending, p)
		if len(pending) >= max(q.limit-len(page.Timers), 64) {
			if full, err := flush(true); full || err != nil {
				return page, err
			}
		}
	}
	if full, err := flush(true); full || err != nil {
		return page, err
	}
	page.NextCursor = encodeCursor(last)
	return page, nil
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
		calls[i] = scriptCall{keys: p.keys, args: []any{s.now(false), time.Minute.Milliseconds()}}
	}
	cmds, err := evalEach(ctx, s.client, countTimers, calls)
	if err != nil {
		return storeStats{}, fmt.Errorf("countTimers: %w", err)
	}
	var st storeStats
	for _, c := range cmds {
		res, err := c.Int64Slice()
		if err != nil || len(res) != 3 {
			return storeStats{}, errors.Join(errors.New("countTimers: unexpected reply"), err)
		}
		st.active += int(res[0])
		st.failing += int(res[1])
		st.dueWithin1m += int(res[2])
	}
	return st, nil
}
