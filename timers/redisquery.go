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

// listChunk is how many sorted-set entries one ZRANGE reads.
const listChunk = 500

// listBudget is how many entries one List call examines at most before it
// returns a (possibly short) page and a cursor.
func listBudget(limit int) int { return max(10*limit, 5000) }

func (s *RedisStore) list(ctx context.Context, q listQuery) (Page, error) {
	maxScore := "+inf"
	if q.upcoming > 0 {
		now, err := s.nowMs(ctx)
		if err != nil {
			return Page{}, err
		}
		maxScore = strconv.FormatInt(now+durMs(q.upcoming), 10)
	}
	minScore := "-inf"
	if q.hasAfter {
		minScore = strconv.FormatInt(q.after.score, 10)
	}
	var page Page
	budget := listBudget(q.limit)
	var last position
	for offset := 0; offset < budget; {
		count := min(listChunk, budget-offset)
		zs, err := s.client.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
			Key: s.keys[0], Start: minScore, Stop: maxScore, ByScore: true,
			Offset: int64(offset), Count: int64(count),
		}).Result()
		if err != nil {
			return Page{}, fmt.Errorf("ZRANGE %s: %w", s.keys[0], err)
		}
		offset += len(zs)
		var names []string
		var places []position
		for _, z := range zs {
			p := position{score: int64(z.Score), name: z.Member.(string)}
			last = p
			if (!q.hasAfter || q.after.less(p)) && q.matchesName(p.name) {
				names, places = append(names, p.name), append(places, p)
			}
		}
		timers, err := s.fetch(ctx, names, q.failing)
		if err != nil {
			return Page{}, err
		}
		for i, t := range timers {
			if t == nil || !q.matchesTimer(*t) {
				continue
			}
			page.Timers = append(page.Timers, *t)
			if len(page.Timers) == q.limit {
				// More may follow unless this was the set's last entry.
				if places[i] != last || len(zs) == count {
					page.NextCursor = encodeCursor(places[i])
				}
				return page, nil
			}
		}
		if len(zs) < count {
			return page, nil // the end of the set
		}
	}
	page.NextCursor = encodeCursor(last)
	return page, nil
}

// fetch reads the named timers (nil where one vanished meanwhile). With
// onlyFailing it first asks the failing set, so that a filtered walk does
// not read the 1 KB records of every healthy timer.
func (s *RedisStore) fetch(ctx context.Context, names []string, onlyFailing bool) ([]*Timer, error) {
	out := make([]*Timer, len(names))
	if len(names) == 0 {
		return out, nil
	}
	fetchNames, at := names, make([]int, len(names))
	for i := range at {
		at[i] = i
	}
	if onlyFailing {
		members := make([]any, len(names))
		for i, n := range names {
			members[i] = n
		}
		is, err := s.client.SMIsMember(ctx, s.keys[2], members...).Result()
		if err != nil {
			return nil, fmt.Errorf("SMISMEMBER %s: %w", s.keys[2], err)
		}
		fetchNames, at = nil, nil
		for i, n := range names {
			if is[i] {
				fetchNames, at = append(fetchNames, n), append(at, i)
			}
		}
		if len(fetchNames) == 0 {
			return out, nil
		}
	}
	vals, err := s.client.HMGet(ctx, s.keys[1], fetchNames...).Result()
	if err != nil {
		return nil, fmt.Errorf("HMGET %s: %w", s.keys[1], err)
	}
	for j, v := range vals {
		rec, ok := v.(string)
		if !ok {
			continue // deleted between the two reads
		}
		t, err := decodeRecord(fetchNames[j], rec)
		if err != nil {
			return nil, err
		}
		out[at[j]] = &t
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

func (s *RedisStore) stats(ctx context.Context) (storeStats, error) {
	res, err := countTimers.Run(ctx, s.client, s.keys, s.now(false), time.Minute.Milliseconds()).Int64Slice()
	if err != nil {
		return storeStats{}, fmt.Errorf("countTimers: %w", err)
	}
	if len(res) != 3 {
		return storeStats{}, errors.New("countTimers: unexpected reply")
	}
	return storeStats{active: int(res[0]), failing: int(res[1]), dueWithin1m: int(res[2])}, nil
}
