package runtime

import "fmt"

// Stash holds messages that an actor cannot handle yet, up to a fixed
// capacity, until UnstashAll gives them back. Keep it in the behavior; use
// it only on the actor's goroutine.
type Stash[T any] struct {
	buf      []T
	capacity int
}

// NewStash makes a stash that holds at most capacity messages.
func NewStash[T any](capacity int) *Stash[T] {
	return &Stash[T]{capacity: capacity}
}

// Stash keeps msg. On a full stash it returns an error wrapping
// [ErrStashFull] and keeps nothing.
func (s *Stash[T]) Stash(msg T) error {
	if len(s.buf) >= s.capacity {
		return fmt.Errorf("stash %T: %w: capacity %d", msg, ErrStashFull, s.capacity)
	}
	s.buf = append(s.buf, msg)
	return nil
}

// Len is the number of stashed messages.
func (s *Stash[T]) Len() int { return len(s.buf) }

// IsFull reports whether Stash would fail.
func (s *Stash[T]) IsFull() bool { return len(s.buf) >= s.capacity }

// Clear drops every stashed message.
func (s *Stash[T]) Clear() { s.buf = nil }

// UnstashAll empties the stash into the actor's mailbox: the messages are
// handled next, in the order they were stashed, before any other mail.
func (s *Stash[T]) UnstashAll(ctx *Context[T]) {
	if len(s.buf) == 0 {
		return
	}
	x := ctx.c.ext()
	rest := x.unstashed[x.unext:]
	x.unstashed = append(s.buf, rest...) //nolint:gocritic // the stashed messages, then what was still to be unstashed
	x.unext = 0
	s.buf = nil
}
