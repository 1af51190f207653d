package durable

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Memory is a Queue in memory: it survives a producer controller, not the
// process. Tests use it; keep the same *Memory to play a producer restart.
// It is safe for concurrent use.
type Memory[A any] struct {
	mu    sync.Mutex
	state State[A]
}

// NewMemory returns an empty queue.
func NewMemory[A any]() *Memory[A] { return &Memory[A]{state: EmptyState[A]()} }

var _ BatchQueue[int] = (*Memory[int])(nil)

// LoadState returns a copy of the state, in a new incarnation.
func (q *Memory[A]) LoadState(ctx context.Context) (State[A], error) {
	if err := ctx.Err(); err != nil {
		return State[A]{}, fmt.Errorf("memory queue: load state: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.state.Incarnation++
	s := q.state
	s.Confirmed = maps.Clone(s.Confirmed)
	s.Unconfirmed = slices.Clone(s.Unconfirmed)
	return s, nil
}

// StoreMessageSent stores m as the Queue contract says.
func (q *Memory[A]) StoreMessageSent(ctx context.Context, m MessageSent[A]) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory queue: store message sent %d: %w", m.SeqNr, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.storeSent([]MessageSent[A]{m})
}

// StoreMessageConfirmed records a confirmation as the Queue contract says.
func (q *Memory[A]) StoreMessageConfirmed(ctx context.Context, seqNr SeqNr, qualifier string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory queue: store message confirmed %d: %w", seqNr, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.storeConfirmed(QualifiedConfirmation{Qualifier: qualifier, SeqNr: seqNr, Timestamp: at})
	return nil
}

// StoreBatch stores b as the BatchQueue contract says.
func (q *Memory[A]) StoreBatch(ctx context.Context, b Batch[A]) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory queue: store batch: %w", err)
	}
	if err := CheckConsecutive(b.Sent); err != nil {
		return fmt.Errorf("memory queue: store batch: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(b.Sent) > 0 {
		if err := q.storeSent(b.Sent); err != nil {
			return err
		}
	}
	for _, c := range b.Confirmed {
		q.storeConfirmed(c)
	}
	return nil
}

// storeSent stores ms, consecutive and not empty, all or none. The caller
// holds the lock.
func (q *Memory[A]) storeSent(ms []MessageSent[A]) error {
	first, last := ms[0].SeqNr, ms[len(ms)-1].SeqNr
	u := q.state.Unconfirmed
	if i := partialChunks(u); i < len(u) && u[i].SeqNr == first {
		clear(u[i:])
		q.state.Unconfirmed = u[:i]
		q.state.CurrentSeqNr = first
	}
	switch cur := q.state.CurrentSeqNr; cur {
	case first:
		q.state.Unconfirmed = append(q.state.Unconfirmed, ms...)
		q.state.CurrentSeqNr = last + 1
		return nil
	case last + 1:
		return nil // stored by an earlier attempt whose reply was lost
	default:
		return fmt.Errorf("memory queue: store message sent %d: %w: current is %d", first, ErrUnexpectedSeqNr, cur)
	}
}

// storeConfirmed records c. The caller holds the lock.
func (q *Memory[A]) storeConfirmed(c QualifiedConfirmation) {
	if prev, ok := q.state.Confirmed[c.Qualifier]; ok && prev.SeqNr >= c.SeqNr {
		return
	}
	if q.state.Confirmed == nil {
		q.state.Confirmed = map[string]Confirmation{}
	}
	q.state.Confirmed[c.Qualifier] = Confirmation{SeqNr: c.SeqNr, Timestamp: c.Timestamp}
	q.state.HighestConfirmedSeqNr = max(q.state.HighestConfirmedSeqNr, c.SeqNr)
	q.state.Unconfirmed = slices.DeleteFunc(q.state.Unconfirmed, func(m MessageSent[A]) bool {
		return m.Qualifier == c.Qualifier && m.SeqNr <= c.SeqNr
	})
}
