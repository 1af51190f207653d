package timers

import (
	"sync"
	"time"
)

// fullClaimEvery is how often a claim asks every partition even when the
// plan says none has anything due: the safety net for what the plan cannot
// know (a wake-up lost while the subscription reconnected, a timer another
// instance released or rescheduled earlier than the partition's earliest),
// and how a wiped partition is noticed. It is the default IdleCheck, the
// same bound the loop's sleep has.
const fullClaimEvery = DefaultIdleCheck

// claimPlan is what one store knows of when each partition may next have
// a timer due, so that a claim asks only those partitions rather than all
// sixteen: with timers falling due one by one, a claim round would
// otherwise cost sixteen scripts per timer. Times are the store's clock
// (the injected one, or the local clock standing for Redis TIME: the plan
// only compares them with each other).
//
// What updates it: each partition's own report (its earliest score, after
// a claim), this store's creates, reschedules and releases, and other
// instances' creates through the wake channel, whose message names the
// partition. A touch that comes while a claim of that partition is under
// way wins over the claim's report, which may predate it. So a write
// touches the plan once it is made (even after an error: it may have
// been): a touch made before the write could be taken by a claim that
// read the partition before the write too, and then that claim's report,
// which knows nothing of the write, would stand until the next full round.
type claimPlan struct {
	mu       sync.Mutex
	next     []time.Time // zero: ask at once; far: nothing known due
	touches  []uint64    // bumped by every touch, to tell a report it is stale
	lastFull time.Time
}

// never is a time no partition's next is later than.
var never = time.Unix(1<<40, 0)

func newClaimPlan(n int) *claimPlan {
	return &claimPlan{next: make([]time.Time, n), touches: make([]uint64, n)}
}

// round returns the partitions to ask at now, with their touch counts for
// report: all of them once fullClaimEvery has passed since the last full
// round, else those whose next time has come.
func (p *claimPlan) round(now time.Time) (parts []int, seen []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	full := now.Sub(p.lastFull) >= fullClaimEvery || now.Before(p.lastFull)
	if full {
		p.lastFull = now
	}
	for i, t := range p.next {
		if full || !t.After(now) {
			parts = append(parts, i)
			seen = append(seen, p.touches[i])
		}
	}
	return parts, seen
}

// report records partition i's earliest time as a claim found it (wait
// from now; negative: empty), unless it was touched since seen.
func (p *claimPlan) report(i int, seen uint64, now time.Time, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.touches[i] != seen {
		return
	}
	if wait < 0 {
		p.next[i] = never
	} else {
		p.next[i] = now.Add(wait)
	}
}

// expect notes that partition i has a timer due at the latest at at.
func (p *claimPlan) expect(i int, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touches[i]++
	if at.Before(p.next[i]) {
		p.next[i] = at
	}
}

// touch notes that partition i may have a timer due now.
func (p *claimPlan) touch(i int) { p.expect(i, time.Time{}) }

// wait is how long from now until the earliest next time; negative when
// no partition has anything known.
func (p *claimPlan) wait(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	earliest := never
	for _, t := range p.next {
		if t.Before(earliest) {
			earliest = t
		}
	}
	if !earliest.Before(never) {
		return -1
	}
	return max(earliest.Sub(now), 0)
}
