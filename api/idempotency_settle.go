package api

import (
	"context"
	"time"
)

// settleTimeout bounds one attempt at recording a request's answer under
// its key.
const settleTimeout = 2 * time.Second

// The pauses between the background attempts at settling a key: from
// settleRetryMin, doubling up to settleRetryMax, so that a key is settled
// within a fraction of a second of the store answering again.
const (
	settleRetryMin = 50 * time.Millisecond
	settleRetryMax = 250 * time.Millisecond
)

// settleLater tries settle again, each attempt bounded by settleTimeout,
// until it succeeds or lapse has passed: by then the key's claim has
// lapsed in the store by itself, and the key is free anyway.
func settleLater(ctx context.Context, settle func(context.Context) error, lapse time.Time) {
	ctx, cancel := context.WithDeadline(ctx, lapse)
	defer cancel()
	for pause := settleRetryMin; ; pause = min(2*pause, settleRetryMax) {
		wait := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		attempt, cancelAttempt := context.WithTimeout(ctx, settleTimeout)
		err := settle(attempt)
		cancelAttempt()
		if err == nil {
			return
		}
	}
}
