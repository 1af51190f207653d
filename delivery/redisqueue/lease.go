package redisqueue

// The queue's owner lease (durable.Owned): one producer controller at a
// time owns a queue, across every process that shares the Redis. The lease
// is a key that Redis expires by itself, holding the owner's token (one
// per Queue value); taking it moves the queue's epoch on (the meta hash's
// incarnation), and store_batch.lua refuses a store whose epoch is not the
// current one, in the same script as the store.

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/delivery/durable"
)

// DefaultLease is how long a queue's owner lease lasts without a renewal:
// how long a queue whose owner died waits before a standby takes it over.
// A standby tries every tenth of the lease, so it takes over a queue whose
// owner stopped gracefully (and released the lease) within that.
const DefaultLease = 10 * time.Second

// Option configures a Queue.
type Option func(*options)

type options struct {
	lease  time.Duration
	holder string
}

// WithLease sets the owner lease (DefaultLease when not given); it must be
// at least 100ms. The owner renews it every third of it.
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// WithHolder sets what this Queue value records, when it takes the lease,
// as the owner's name: an instance's id and address, say, so that the
// others can find the owner ([Queue.Holder]). Without it the owner is
// recorded without a name.
func WithHolder(name string) Option { return func(o *options) { o.holder = name } }

//go:embed lease.lua
var leaseSrc string

var leaseScript = redis.NewScript(leaseSrc)

// errFencedReply starts the error reply of store_batch.lua for a store of
// an epoch that is over.
const errFencedReply = "FENCED"

var _ durable.Owned = (*Queue[int])(nil)

// acquire takes the lease and returns the new epoch, or an
// *durable.OwnedError while another holds it.
func (q *Queue[A]) acquire(ctx context.Context) (uint64, error) {
	res, err := leaseScript.Run(ctx, q.client, []string{q.meta, q.lease}, "acquire", q.token, q.leaseMs(), q.holder).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("take the lease: %w", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("take the lease: unexpected reply %v", res)
	}
	if res[0] == 0 {
		// A standby tries again when the lease would lapse, or after a
		// tenth of it if that is sooner: an owner that stops gracefully
		// releases its lease, and is replaced that soon.
		retry := min(time.Duration(res[1])*time.Millisecond, q.leaseFor/10)
		return 0, &durable.OwnedError{RetryIn: max(retry, 10*time.Millisecond)}
	}
	return uint64(res[1]), nil
}

func (q *Queue[A]) leaseMs() int64 { return q.leaseFor.Milliseconds() }

// RenewEvery returns a third of the lease.
func (q *Queue[A]) RenewEvery() time.Duration { return q.leaseFor / 3 }

// Renew extends the lease of the epoch this Queue last loaded, as
// durable.Owned says.
func (q *Queue[A]) Renew(ctx context.Context) error {
	epoch := q.epoch.Load()
	if epoch == 0 {
		return nil // never loaded: nothing to renew
	}
	ok, err := leaseScript.Run(ctx, q.client, []string{q.meta, q.lease}, "renew", q.token, q.leaseMs(), epoch).Int64()
	if err != nil {
		return fmt.Errorf("redisqueue %s: renew the lease of epoch %d: %w", q.name, epoch, err)
	}
	if ok == 0 {
		return fmt.Errorf("redisqueue %s: renew the lease of epoch %d: %w", q.name, epoch, durable.ErrFenced)
	}
	return nil
}

// Release gives the lease up if this Queue still holds it, as
// durable.Owned says.
func (q *Queue[A]) Release(ctx context.Context) error {
	epoch := q.epoch.Load()
	if epoch == 0 {
		return nil
	}
	if err := leaseScript.Run(ctx, q.client, []string{q.meta, q.lease}, "release", q.token, q.leaseMs(), epoch).Err(); err != nil {
		return fmt.Errorf("redisqueue %s: release the lease of epoch %d: %w", q.name, epoch, err)
	}
	return nil
}

// Holder returns whether an owner's lease runs, and the name that owner
// recorded (see [WithHolder]; "" for none).
func (q *Queue[A]) Holder(ctx context.Context) (name string, held bool, err error) {
	var lease *redis.IntCmd
	var holder *redis.StringCmd
	_, err = q.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		lease = p.Exists(ctx, q.lease)
		holder = p.HGet(ctx, q.meta, "holder")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", false, fmt.Errorf("redisqueue %s: read the lease's holder: %w", q.name, err)
	}
	if lease.Val() == 0 {
		return "", false, nil
	}
	return holder.Val(), true, nil
}

// fenced turns store_batch.lua's refusal into an error wrapping
// durable.ErrFenced; other errors are returned as they are.
func fenced(err error, epoch uint64) error {
	var re redis.Error
	if !errors.As(err, &re) {
		return err
	}
	msg := re.Error()
	if len(msg) < len(errFencedReply) || msg[:len(errFencedReply)] != errFencedReply {
		return err
	}
	now, _ := strconv.ParseUint(msg[len(errFencedReply)+1:], 10, 64)
	return fmt.Errorf("%w: this controller's epoch is %d, the queue's %d", durable.ErrFenced, epoch, now)
}
