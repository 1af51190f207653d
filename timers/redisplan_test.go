package timers

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestClaimPlan pins what a claim asks: every partition in a full round,
// at most fullClaimEvery apart; otherwise only those whose next time has
// come; a touch during a claim wins over that claim's report; and the
// loop's wait is until the earliest next time.
func TestClaimPlan(t *testing.T) {
	t0 := epoch
	p := newClaimPlan(4)
	parts, seen := p.round(t0)
	if !slices.Equal(parts, []int{0, 1, 2, 3}) {
		t.Fatalf("first round asks %v, want every partition", parts)
	}
	// The reports: 0 empty, 1 due in 5 s, 2 due now, 3 due in 200 ms.
	for i, w := range []time.Duration{-1, 5 * time.Second, 0, 200 * time.Millisecond} {
		p.report(parts[i], seen[i], t0, w)
	}
	if w := p.wait(t0); w != 0 {
		t.Errorf("wait = %v, want 0 (partition 2 is due)", w)
	}
	if parts, _ := p.round(t0.Add(100 * time.Millisecond)); !slices.Equal(parts, []int{2}) {
		t.Errorf("round at +100 ms asks %v, want [2]", parts)
	}
	// Partition 2 claimed, now empty; a create in 1 expects a timer at +1 s.
	parts, seen = p.round(t0.Add(150 * time.Millisecond))
	p.expect(1, t0.Add(time.Second))
	p.report(2, seen[slices.Index(parts, 2)], t0.Add(150*time.Millisecond), -1)
	if w := p.wait(t0.Add(150 * time.Millisecond)); w != 50*time.Millisecond {
		t.Errorf("wait = %v, want 50 ms (partition 3 at +200 ms)", w)
	}
	if parts, _ := p.round(t0.Add(900 * time.Millisecond)); !slices.Equal(parts, []int{3}) {
		t.Errorf("round at +900 ms asks %v, want [3] (1 is expected at +1 s)", parts)
	}
	// A touch of 0 while a claim of it is under way: the claim's report
	// ("empty"), which may predate the touch, must not hide it.
	seen0 := p.touches[0]
	p.touch(0)
	p.report(0, seen0, t0.Add(910*time.Millisecond), -1)
	if parts, _ := p.round(t0.Add(920 * time.Millisecond)); !slices.Contains(parts, 0) {
		t.Errorf("round after a touch asks %v, want 0 among them", parts)
	}
	// A full round once fullClaimEvery has passed since the last one.
	if parts, _ := p.round(t0.Add(fullClaimEvery + 300*time.Millisecond)); len(parts) != 4 {
		t.Errorf("round a second after the last full one asks %v, want all 4", parts)
	}
	// Nothing known anywhere: the wait is negative.
	q := newClaimPlan(2)
	parts, seen = q.round(t0)
	for i := range parts {
		q.report(parts[i], seen[i], t0, -1)
	}
	if w := q.wait(t0); w >= 0 {
		t.Errorf("wait of an empty store = %v, want negative", w)
	}
}

// claimBeforeAdvance is a Redis hook that runs a claim of store just
// before the first pipeline of the advance script goes out: a claim round
// of the loop's that reads the partition of a recurring timer while its
// run is being advanced, after the store planned the next run and before
// the write of it.
type claimBeforeAdvance struct {
	store   *RedisStore
	done    *atomic.Bool
	claimed *atomic.Int64 // the timers that claim took
}

func (h claimBeforeAdvance) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h claimBeforeAdvance) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (h claimBeforeAdvance) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			args := c.Args()
			if len(args) > 1 && (args[1] == advanceRecurringTimers.Hash() || args[1] == luaPrelude+advanceSrc) &&
				h.done.CompareAndSwap(false, true) {
				b, _ := h.store.claim(ctx, 10, time.Minute)
				h.claimed.Add(int64(len(b.timers)))
				break
			}
		}
		return next(ctx, cmds)
	}
}

// TestRedisPlanNotStaleAfterAdvance: a claim that reads a recurring
// timer's partition while its run is advanced to a next run that is
// already due (a catch-up) does not hide that run from the plan: it is
// claimed without the clock moving, not after the next full round.
func TestRedisPlanNotStaleAfterAdvance(t *testing.T) {
	clk := clockwork.NewFakeClockAt(epoch)
	client := testenv.Redis(t)
	store := newRedisStoreOn(t, client, newTestPrefix(), clk)
	var done atomic.Bool
	var claimed atomic.Int64
	client.AddHook(claimBeforeAdvance{store: store, done: &done, claimed: &claimed})
	rec := newRecorder(clk)
	s := newScheduler(t, store, rec, Config{})
	// Three runs missed (minutes 1 to 3), all caught up one after another.
	sc := Schedule{Every: time.Minute, Start: epoch.Add(time.Minute), CatchUp: CatchUpAll, CatchUpWindow: 5 * time.Minute}
	mustRecur(t, s, "r", sc)
	clk.Advance(3*time.Minute + 30*time.Second)
	startScheduler(t, store, rec, Config{})
	waitFor(t, "the three missed runs", func() bool { return rec.len() == 3 })
	if !done.Load() {
		t.Fatal("no claim ran before an advance")
	}
	if n := claimed.Load(); n != 0 {
		t.Fatalf("the claim before the advance took %d timers, want none (only the timer being advanced exists)", n)
	}
}
