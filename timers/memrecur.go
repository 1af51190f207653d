package timers

import (
	"container/heap"
	"context"
	"fmt"
	"time"
)

// checkGen applies a create's ifGen to the stored timer prev (of which
// there is one when exists).
func checkGen(r createRequest, prev *memTimer, exists bool) error {
	switch {
	case r.ifGen == 0:
		return nil
	case !exists:
		return fmt.Errorf("timer %q: %w", r.name, ErrNotFound)
	case prev.t.Generation != r.ifGen:
		return fmt.Errorf("timer %q: %w", r.name, ErrChanged)
	}
	return nil
}

func (s *MemoryStore) advance(ctx context.Context, as []advanceRequest) ([]advanceOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nowMs := floorMs(s.clk.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]advanceOutcome, len(as))
	for i, a := range as {
		m, cur := s.current(a.firing, a.checkAttempt)
		if !cur {
			continue
		}
		if a.dead != "" {
			d := DeadLetter{Timer: cloneTimer(m.t), DiedAt: time.UnixMilli(nowMs)}
			d.Name, d.Recurring, d.LastError = a.dead, nil, truncateError(a.err)
			s.dead[a.dead] = d
		}
		if a.next == nil {
			s.removeLocked(a.firing.Name)
			out[i] = advanceEnded
			continue
		}
		s.gen++
		r := *a.next
		m.score = ceilMs(a.due)
		m.t = Timer{
			Name: m.t.Name, Call: m.t.Call, DueAt: time.UnixMilli(m.score), CreatedAt: m.t.CreatedAt,
			MaxRetries: m.t.MaxRetries, Generation: s.gen, Recurring: &r, TraceContext: m.t.TraceContext,
		}
		heap.Fix(&s.queue, m.index)
		out[i] = advanced
	}
	return out, nil
}

func (s *MemoryStore) putDead(ctx context.Context, d DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	d.Timer = cloneTimer(d.Timer)
	d.Generation, d.Recurring = s.gen, nil
	d.DueAt, d.CreatedAt = time.UnixMilli(d.DueAt.UnixMilli()), time.UnixMilli(d.CreatedAt.UnixMilli())
	d.DiedAt = time.UnixMilli(d.DiedAt.UnixMilli())
	if !d.LastAttemptAt.IsZero() {
		d.LastAttemptAt = time.UnixMilli(d.LastAttemptAt.UnixMilli())
	}
	s.dead[d.Name] = d
	return nil
}
