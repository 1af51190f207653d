package timers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The MemoryStore's dead letters: a map by name, listed in the order of
// time of death, then name, like the Redis store's sorted sets.

func (d DeadLetter) position() position { return position{d.DiedAt.UnixMilli(), d.Name} }

func (s *MemoryStore) deadList(ctx context.Context, q listQuery) (DeadLetterPage, error) {
	if err := ctx.Err(); err != nil {
		return DeadLetterPage{}, err
	}
	s.mu.Lock()
	var all []DeadLetter
	for _, d := range s.dead {
		if (!q.hasAfter || q.after.less(d.position())) && q.matchesName(d.Name) && q.matchesTimer(d.Timer) {
			all = append(all, d)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b DeadLetter) int {
		if c := a.DiedAt.Compare(b.DiedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var page DeadLetterPage
	for _, d := range all[:min(len(all), q.limit)] {
		d.Timer = cloneTimer(d.Timer)
		page.DeadLetters = append(page.DeadLetters, d)
	}
	if len(all) > q.limit {
		page.NextCursor = encodeCursor(all[q.limit-1].position())
	}
	return page, nil
}

func (s *MemoryStore) deadGet(ctx context.Context, name string) (DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return DeadLetter{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.dead[name]
	if !ok {
		return DeadLetter{}, fmt.Errorf("dead letter %q: %w", name, ErrNotFound)
	}
	d.Timer = cloneTimer(d.Timer)
	return d, nil
}

func (s *MemoryStore) deadRemove(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.dead, name)
	s.mu.Unlock()
	return nil
}

func (s *MemoryStore) revive(ctx context.Context, name string, maxActive int) (Timer, error) {
	if err := ctx.Err(); err != nil {
		return Timer{}, err
	}
	s.mu.Lock()
	d, ok := s.dead[name]
	_, taken := s.byName[name]
	s.mu.Unlock()
	switch {
	case !ok:
		return Timer{}, fmt.Errorf("dead letter %q: %w", name, ErrNotFound)
	case taken:
		return Timer{}, fmt.Errorf("dead letter %q: %w", name, ErrNameTaken)
	}
	// createIf checks again under the lock, so that the check and the
	// move are one step.
	return s.createIf(ctx, createRequest{name: name, call: d.Call, maxRetries: d.MaxRetries, maxActive: maxActive},
		func() error {
			if cur, ok := s.dead[name]; !ok || cur.Generation != d.Generation {
				return fmt.Errorf("dead letter %q: %w", name, ErrNotFound)
			}
			if _, taken := s.byName[name]; taken {
				return fmt.Errorf("dead letter %q: %w", name, ErrNameTaken)
			}
			delete(s.dead, name)
			return nil
		})
}

func (s *MemoryStore) prune(ctx context.Context, retention time.Duration, max int) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	cutoff := floorMs(s.clk.Now()) - durMs(retention)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for name, d := range s.dead {
		if n == max {
			return n, true, nil
		}
		if d.DiedAt.UnixMilli() <= cutoff {
			delete(s.dead, name)
			n++
		}
	}
	return n, false, nil
}
