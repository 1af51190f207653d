package timers

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// MemoryStore keeps timers in process memory: the embedded default for a
// single instance, and the reference the Redis store is tested against. It
// is not durable. Schedulers that share one MemoryStore behave like
// instances sharing one Redis (claims, leases and wake-ups included), which
// is how the conformance suite tests the multi-instance rules on it too.
//
// It is safe for concurrent use.
type MemoryStore struct {
	clk clockwork.Clock

	mu     sync.Mutex
	gen    uint64 // the last generation handed out
	byName map[string]*memTimer
	queue  memQueue // every timer, by (score, name)
	dead   map[string]DeadLetter
	subs   map[int]func()
	nextID int
	// imports are the import jobs' records.
	imports map[string]memImportJob
}

// memTimer is a stored timer and its place in the run order.
type memTimer struct {
	t Timer
	// score is when the timer is next claimable, in store milliseconds:
	// its due time, or its lease's expiry while claimed.
	score int64
	index int // in queue
}

// NewMemoryStore returns an empty MemoryStore on clock (the real clock if
// nil).
func NewMemoryStore(clock clockwork.Clock) *MemoryStore {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &MemoryStore{clk: clock, byName: make(map[string]*memTimer), dead: make(map[string]DeadLetter), subs: make(map[int]func())}
}

var _ Store = (*MemoryStore)(nil)

// A memory store cannot be wiped behind the scheduler's back, so it has
// no marker.
func (s *MemoryStore) clock() clockwork.Clock                 { return s.clk }
func (s *MemoryStore) open(context.Context) ([]string, error) { return nil, nil }
func (s *MemoryStore) resetMarker(context.Context) error      { return nil }
func (s *MemoryStore) ping(ctx context.Context) error         { return ctx.Err() }

func (m *memTimer) position() position { return position{m.score, m.t.Name} }

func (s *MemoryStore) create(ctx context.Context, r createRequest) (Timer, error) {
	return s.createIf(ctx, r, nil)
}

// createIf is create, which first runs check (when not nil) under the
// store's lock: an error of check refuses the create.
func (s *MemoryStore) createIf(ctx context.Context, r createRequest, check func() error) (Timer, error) {
	if err := ctx.Err(); err != nil {
		return Timer{}, err
	}
	now := s.clk.Now()
	nowMs := ceilMs(now)
	due := nowMs + durMs(r.delay)
	if !r.at.IsZero() {
		due = ceilMs(r.at)
	}
	call := r.call
	call.Argument = slices.Clone(call.Argument)

	s.mu.Lock()
	prev, replacing := s.byName[r.name]
	if err := checkGen(r, prev, replacing); err != nil {
		s.mu.Unlock()
		return Timer{}, err
	}
	if !replacing && len(s.byName) >= r.maxActive {
		n := len(s.byName)
		s.mu.Unlock()
		return Timer{}, &LimitError{Limit: LimitActive, Value: n, Max: r.maxActive}
	}
	if check != nil {
		if err := check(); err != nil {
			s.mu.Unlock()
			return Timer{}, err
		}
	}
	first, any := s.queue.first()
	s.gen++
	t := Timer{
		Name: r.name, Call: call, DueAt: time.UnixMilli(due), CreatedAt: time.UnixMilli(nowMs),
		MaxRetries: r.maxRetries, Generation: s.gen, Recurring: r.recur,
		TraceContext: r.traceCtx,
	}
	t = cloneTimer(t)
	if replacing {
		prev.t, prev.score = t, due
		heap.Fix(&s.queue, prev.index)
	} else {
		m := &memTimer{t: t, score: due}
		s.byName[r.name] = m
		heap.Push(&s.queue, m)
	}
	earliest := !any || due < first
	var wake []func()
	if earliest {
		for _, f := range s.subs {
			wake = append(wake, f)
		}
	}
	s.mu.Unlock()
	for _, f := range wake {
		f()
	}
	return cloneTimer(t), nil
}

func (s *MemoryStore) get(ctx context.Context, name string) (Timer, error) {
	if err := ctx.Err(); err != nil {
		return Timer{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.byName[name]
	if !ok {
		return Timer{}, fmt.Errorf("timer %q: %w", name, ErrNotFound)
	}
	return cloneTimer(m.t), nil
}

func (s *MemoryStore) remove(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(name)
	return nil
}

func (s *MemoryStore) removeLocked(name string) {
	if m, ok := s.byName[name]; ok {
		heap.Remove(&s.queue, m.index)
		delete(s.byName, name)
	}
}

func (s *MemoryStore) list(ctx context.Context, q listQuery) (Page, error) {
	if err := ctx.Err(); err != nil {
		return Page{}, err
	}
	maxScore := int64(math.MaxInt64)
	if q.upcoming > 0 {
		maxScore = floorMs(s.clk.Now()) + durMs(q.upcoming)
	}
	s.mu.Lock()
	all := make([]*memTimer, 0, len(s.queue))
	for _, m := range s.queue {
		p := m.position()
		if (!q.hasAfter || q.after.less(p)) && m.score <= maxScore && q.matchesName(m.t.Name) && q.matchesTimer(m.t) {
			all = append(all, m)
		}
	}
	slices.SortFunc(all, func(a, b *memTimer) int {
		pa, pb := a.position(), b.position()
		switch {
		case pa.less(pb):
			return -1
		case pb.less(pa):
			return 1
		}
		return 0
	})
	var page Page
	for _, m := range all[:min(len(all), q.limit)] {
		page.Timers = append(page.Timers, cloneTimer(m.t))
	}
	if len(all) > q.limit {
		page.NextCursor = encodeCursor(all[q.limit-1].position())
	}
	s.mu.Unlock()
	return page, nil
}

func (s *MemoryStore) stats(ctx context.Context) (storeStats, error) {
	if err := ctx.Err(); err != nil {
		return storeStats{}, err
	}
	horizon := floorMs(s.clk.Now()) + time.Minute.Milliseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := storeStats{active: len(s.byName), dead: len(s.dead)}
	for _, m := range s.queue {
		if m.t.Failing() {
			st.failing++
		}
		if m.score <= horizon {
			st.dueWithin1m++
		}
	}
	return st, nil
}

func (s *MemoryStore) claim(ctx context.Context, max int, lease time.Duration) (claimBatch, error) {
	if err := ctx.Err(); err != nil {
		return claimBatch{}, err
	}
	now := s.clk.Now()
	nowMs := floorMs(now)
	leaseMs := max64(durMs(lease), 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	b := claimBatch{now: time.UnixMilli(nowMs)}
	for len(b.timers) < max && len(s.queue) > 0 && s.queue[0].score <= nowMs {
		m := s.queue[0]
		// Every write but a claim puts the score at the due time; a score
		// past it is a lease that ran out.
		b.leaseExpired = append(b.leaseExpired, m.score > m.t.DueAt.UnixMilli())
		m.t.Attempts++
		m.t.LastAttemptAt = time.UnixMilli(nowMs)
		m.score = nowMs + leaseMs
		heap.Fix(&s.queue, 0)
		b.timers = append(b.timers, cloneTimer(m.t))
	}
	b.wait = -1
	if first, ok := s.queue.first(); ok {
		b.wait = time.Duration(max64(first-nowMs, 0)) * time.Millisecond
	}
	return b, nil
}

// current returns the stored timer if f is still its current attempt's
// generation (and attempt, when checkAttempt).
func (s *MemoryStore) current(f Firing, checkAttempt bool) (*memTimer, bool) {
	m, ok := s.byName[f.Name]
	if !ok || m.t.Generation != f.Generation || (checkAttempt && m.t.Attempts != f.Attempt) {
		return nil, false
	}
	return m, true
}

func (s *MemoryStore) complete(ctx context.Context, fs []Firing) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := make([]bool, len(fs))
	for i, f := range fs {
		// Any attempt of the generation completes it: the call succeeded
		// at least once, even if a later attempt (after a lost lease) is
		// still running.
		if _, cur := s.current(f, false); cur {
			s.removeLocked(f.Name)
			ok[i] = true
		}
	}
	return ok, nil
}

func (s *MemoryStore) fail(ctx context.Context, fs []failure) ([]failOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nowMs := floorMs(s.clk.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]failOutcome, len(fs))
	for i, f := range fs {
		m, cur := s.current(f.firing, true)
		switch {
		case !cur:
			out[i] = failStale
		case f.giveUp:
			d := DeadLetter{Timer: m.t, DiedAt: time.UnixMilli(nowMs)}
			d.LastError = truncateError(f.err)
			s.dead[f.firing.Name] = d
			s.removeLocked(f.firing.Name)
			out[i] = failGaveUp
		default:
			m.t.LastError = truncateError(f.err)
			m.score = nowMs + durMs(f.retryAfter)
			m.t.DueAt = time.UnixMilli(m.score)
			heap.Fix(&s.queue, m.index)
			out[i] = failRescheduled
		}
	}
	return out, nil
}

func (s *MemoryStore) release(ctx context.Context, fs []Firing) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	nowMs := floorMs(s.clk.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fs {
		if m, cur := s.current(f, true); cur {
			m.score = nowMs
			m.t.DueAt = time.UnixMilli(nowMs)
			heap.Fix(&s.queue, m.index)
		}
	}
	return nil
}

func (s *MemoryStore) subscribe(wake func()) (func(), error) {
	s.mu.Lock()
	id := s.nextID
	s.nextID++
	s.subs[id] = wake
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.subs, id)
		s.mu.Unlock()
	}, nil
}

// cloneTimer copies t's argument, so that callers never share the store's.
func cloneTimer(t Timer) Timer {
	t.Call.Argument = slices.Clone(t.Call.Argument)
	if t.Recurring != nil {
		r := *t.Recurring
		t.Recurring = &r
	}
	return t
}

// truncateError bounds a stored error message (maxErrorLen bytes).
func truncateError(s string) string {
	if len(s) <= maxErrorLen {
		return s
	}
	return s[:maxErrorLen-3] + "..."
}

func max64(a, b int64) int64 { return max(a, b) }

// memQueue is a min-heap of timers by (score, name).
type memQueue []*memTimer

func (q memQueue) Len() int { return len(q) }
func (q memQueue) Less(i, j int) bool {
	return position{q[i].score, q[i].t.Name}.less(position{q[j].score, q[j].t.Name})
}
func (q memQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *memQueue) Push(x any) {
	m := x.(*memTimer)
	m.index = len(*q)
	*q = append(*q, m)
}
func (q *memQueue) Pop() any {
	old := *q
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return m
}

// first is the earliest score.
func (q memQueue) first() (int64, bool) {
	if len(q) == 0 {
		return 0, false
	}
	return q[0].score, true
}
