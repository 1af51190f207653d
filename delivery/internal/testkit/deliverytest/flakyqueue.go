package deliverytest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
)

var errFlaky = errors.New("flaky queue: injected failure")

// FlakyQueue wraps a durable queue and fails calls at random: a store
// fails either before it stores or after it (as a lost reply would), so the
// retries exercise the queue's idempotence.
type FlakyQueue[A any] struct {
	q        durable.Queue[A]
	fail     float64       // probability that a call fails
	delay    time.Duration // every call takes this long
	mu       sync.Mutex
	rng      *rand.Rand
	failures atomic.Int64
}

func newFlakyQueue[A any](q durable.Queue[A], fail float64, delay time.Duration, seed uint64) *FlakyQueue[A] {
	return &FlakyQueue[A]{q: q, fail: fail, delay: delay, rng: rand.New(rand.NewPCG(seed, 3))}
}

// roll returns a number in [0, 1) after the call's delay.
func (f *FlakyQueue[A]) roll(ctx context.Context) (float64, error) {
	if f.delay > 0 {
		t := time.NewTimer(f.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64(), nil
}

// LoadState loads the inner queue's state, or fails at random without
// asking it.
func (f *FlakyQueue[A]) LoadState(ctx context.Context) (durable.State[A], error) {
	r, err := f.roll(ctx)
	if err != nil {
		return durable.State[A]{}, err
	}
	if r < f.fail {
		f.failures.Add(1)
		return durable.State[A]{}, errFlaky
	}
	return f.q.LoadState(ctx)
}

// StoreMessageSent stores m in the inner queue, failing at random before
// or after it stores (see store).
func (f *FlakyQueue[A]) StoreMessageSent(ctx context.Context, m durable.MessageSent[A]) error {
	return f.store(ctx, func() error { return f.q.StoreMessageSent(ctx, m) })
}

// StoreBatch makes the queue a durable.BatchQueue, as its inner queue must
// be, so that the retries exercise the idempotence of batches too.
func (f *FlakyQueue[A]) StoreBatch(ctx context.Context, b durable.Batch[A]) error {
	return f.store(ctx, func() error { return f.q.(durable.BatchQueue[A]).StoreBatch(ctx, b) })
}

// store runs a store that fails before or after it stores, at random.
func (f *FlakyQueue[A]) store(ctx context.Context, store func() error) error {
	r, err := f.roll(ctx)
	if err != nil {
		return err
	}
	if r < f.fail/2 {
		f.failures.Add(1)
		return errFlaky
	}
	if err := store(); err != nil {
		return err
	}
	if r < f.fail {
		f.failures.Add(1)
		return errFlaky // stored, but the caller does not know
	}
	return nil
}

// StoreMessageConfirmed stores the confirmation in the inner queue, or
// fails at random without storing it.
func (f *FlakyQueue[A]) StoreMessageConfirmed(ctx context.Context, seqNr delivery.SeqNr, qualifier string, at time.Time) error {
	r, err := f.roll(ctx)
	if err != nil {
		return err
	}
	if r < f.fail {
		f.failures.Add(1)
		return errFlaky
	}
	return f.q.StoreMessageConfirmed(ctx, seqNr, qualifier, at)
}
