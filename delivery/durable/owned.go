package durable

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrFenced is wrapped by the error of a store (or a renewal) that a queue
// refused because another producer controller loaded it since: the caller
// is deposed and must stop. A producer controller fails with it at once,
// without retrying.
var ErrFenced = errors.New("durable: queue taken over by another producer controller")

// ErrOwned is wrapped by the error of a LoadState that found the queue
// owned by another live producer controller (see [Owned]). A producer
// controller stands by: it loads again after [OwnedError.RetryIn], as long
// as it lives, and takes the queue over once the owner's lease lapses.
var ErrOwned = errors.New("durable: queue owned by another producer controller")

// OwnedError is the error of a LoadState refused with ErrOwned.
type OwnedError struct {
	// RetryIn is when to try again: at the latest when the owner's lease
	// lapses unless it renews it.
	RetryIn time.Duration
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("%v (its lease runs %v more)", ErrOwned, e.RetryIn)
}

// Unwrap returns ErrOwned.
func (e *OwnedError) Unwrap() error { return ErrOwned }

// Owned is a Queue that one producer controller at a time owns, by a lease
// that a store of the queue's own keeps (package redisqueue's in Redis):
// the only way to run one live producer per producer id on several
// processes that share the store. It is discovered by type assertion.
//
// LoadState takes the lease when it is free (or already this Queue
// value's), and refuses with an *OwnedError while another holds it.
// Taking it moves the queue's epoch on (State.Incarnation), and every
// store is refused, atomically with the check, with an error wrapping
// ErrFenced once the epoch moved past the one this Queue value loaded. So
// a deposed controller can neither lose nor reorder what its successor
// stored, whatever its clock or its pauses.
type Owned interface {
	// RenewEvery is how often the owner renews the lease: a third of it.
	RenewEvery() time.Duration
	// Renew extends the lease of the epoch last loaded, or returns an
	// error wrapping ErrFenced when that epoch is over.
	Renew(ctx context.Context) error
	// Release gives the lease up, if this Queue value still holds it, so
	// that a standby takes the queue over at once; stores of the epoch
	// are still taken until another controller loads.
	Release(ctx context.Context) error
}
