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

var _ Queue[int] = (*Memory[int])(nil)

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
	u := q.state.Unconfirmed
	if i := partialChunks(u); i < len(u) && u[i].SeqNr == m.SeqNr {
		clear(u[i:])
		q.state.Unconfirmed = u[:i]
		q.state.CurrentSeqNr = m.SeqNr
	}
	switch cur := q.state.CurrentSeqNr; m.SeqNr {
	case cur:
		q.state.Unconfirmed = append(q.state.Unconfirmed, m)
		q.state.CurrentSeqNr++
		return nil
	case cur - 1:
		return nil // stored by an earlier attempt whose reply was lost
	default:
		return fmt.Errorf("memory queue: store message sent %d: %w: current is %d", m.SeqNr, ErrUnexpectedSeqNr, cur)
	}
}

// StoreMessageConfirmed records a confirmation as the Queue contract says.
func (q *Memory[A]) StoreMessageConfirmed(ctx context.Context, seqNr SeqNr, qualifier string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory queue: store message confirmed %d: %w", seqNr, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if c, ok := q.state.Confirmed[qualifier]; ok && c.SeqNr >= seqNr {
		return nil
	}
	if q.state.Confirmed == nil {
		q.state.Confirmed = map[string]Confirmation{}
	}
	q.state.Confirmed[qualifier] = Confirmation{SeqNr: seqNr, Timestamp: at}
	q.state.HighestConfirmedSeqNr = max(q.state.HighestConfirmedSeqNr, seqNr)
	q.state.Unconfirmed = slices.DeleteFunc(q.state.Unconfirmed, func(m MessageSent[A]) bool {
		return m.Qualifier == qualifier && m.SeqNr <= seqNr
	})
	return nil
}
