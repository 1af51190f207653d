package timers

import (
	"context"
	"fmt"
	"time"
)

// DefaultDeadLetterRetention is how long a dead letter is kept by default.
const DefaultDeadLetterRetention = 7 * 24 * time.Hour

// DeadLetter is a timer that gave up: its call failed 1+MaxRetries times.
// It is kept, out of the run order and not counted toward MaxActive, for
// Config.DeadLetterRetention after DiedAt, so that an operator can see
// why and run it again ([Scheduler.RetryDeadLetter]). Its Timer is as it
// was at its last attempt: the call, the attempts, the last error, and
// DueAt the last attempt's due time. A timer of the same name that gives
// up later replaces it.
type DeadLetter struct {
	Timer
	// DiedAt is when the last attempt failed, in the store's time.
	DiedAt time.Time
}

// DeadLetterQuery selects dead letters for [Scheduler.ListDeadLetters];
// the fields are as in [ListQuery], and combine with AND.
type DeadLetterQuery struct {
	NameContains string
	// ComponentID, Method and EntityID, when not "", keep the dead letters
	// whose call goes to that component, runs that method, or addresses
	// that entity (exact matches).
	ComponentID, Method, EntityID string
	Limit                         int
	Cursor                        string
}

// DeadLetterPage is one page of dead letters, by time of death (oldest
// first), then by name, with the walk's guarantees of [Page].
type DeadLetterPage struct {
	DeadLetters []DeadLetter
	// NextCursor continues the walk; "" when it is done.
	NextCursor string
}

// deadPruneBatch bounds the dead letters one pruning pass removes per
// partition, and deadPruneEvery is how often the loop prunes while there
// is nothing more to prune.
const (
	deadPruneBatch = 200
	deadPruneEvery = time.Minute
)

// ListDeadLetters returns one page of the dead letters that match q. A bad
// limit or cursor is an error wrapping ErrInvalidQuery.
func (s *Scheduler) ListDeadLetters(ctx context.Context, q DeadLetterQuery) (DeadLetterPage, error) {
	lq, err := ListQuery{NameContains: q.NameContains, Limit: q.Limit, Cursor: q.Cursor,
		ComponentID: q.ComponentID, Method: q.Method, EntityID: q.EntityID}.validate()
	if err != nil {
		return DeadLetterPage{}, fmt.Errorf("list dead letters: %w", err)
	}
	p, err := s.store.deadList(ctx, lq)
	if err != nil {
		return DeadLetterPage{}, fmt.Errorf("list dead letters: %w", err)
	}
	return p, nil
}

// GetDeadLetter returns the dead letter called name, or an error wrapping
// ErrNotFound.
func (s *Scheduler) GetDeadLetter(ctx context.Context, name string) (DeadLetter, error) {
	d, err := s.store.deadGet(ctx, name)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("get dead letter %q: %w", name, err)
	}
	return d, nil
}

// RetryDeadLetter runs the dead letter called name again: in one atomic
// step it becomes an active timer of that name, due now, with its call
// and MaxRetries, a new generation and no attempts (fresh retries), and
// the dead letter is gone. It fails with ErrNotFound when there is no
// such dead letter, ErrNameTaken when an active timer has the name, and
// a *LimitError when the store holds MaxActive timers.
func (s *Scheduler) RetryDeadLetter(ctx context.Context, name string) (Timer, error) {
	t, err := s.store.revive(ctx, name, s.cfg.MaxActive)
	if err != nil {
		return Timer{}, fmt.Errorf("retry dead letter %q: %w", name, err)
	}
	s.metrics.deadRetried.Inc()
	if l := s.currentLoop(); l != nil {
		l.noteDue(s.clk.Now())
	}
	return t, nil
}

// DeleteDeadLetter removes the dead letter called name; a missing one is
// not an error.
func (s *Scheduler) DeleteDeadLetter(ctx context.Context, name string) error {
	if err := s.store.deadRemove(ctx, name); err != nil {
		return fmt.Errorf("delete dead letter %q: %w", name, err)
	}
	return nil
}

// pruneDead removes the dead letters older than the retention, at most
// deadPruneBatch per partition, and reports whether there may be more.
func (s *Scheduler) pruneDead(ctx context.Context) (more bool, err error) {
	n, more, err := s.store.prune(ctx, s.cfg.DeadLetterRetention, deadPruneBatch)
	if n > 0 {
		s.metrics.deadPruned.Add(float64(n))
	}
	if err != nil {
		return false, fmt.Errorf("prune dead letters: %w", err)
	}
	return more, nil
}
