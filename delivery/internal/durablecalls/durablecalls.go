// Package durablecalls is the client of a durable producer queue that
// every controller with one (point to point, work pulling, sharding) uses:
// calls on goroutines of their own, deadlines on the system's clock,
// retries, pipelined and batched stores, confirmations written behind.
package durablecalls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/drain"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/runtime"
)

// A controller with a durable queue (point to point, work pulling,
// sharding) calls it through a Calls: from goroutines of its own
// (one for loads and stores, one for confirmations, each one call at a
// time), so that a slow store never blocks the runtime's workers, and
// hears of each result as a message. Each call has a deadline on the
// system's clock (an actor timer, so tests drive it with a fake clock); a
// call that fails or times out is tried again, up to
// DurableQueueRetryAttempts more times, after which the controller fails.
//
// Stores are pipelined: the controller may hand over messages while others
// are being stored, and hears, in order, how many more are stored. With a
// durable.BatchQueue the messages that come while one call is in flight
// make the next call, one batch (one round trip to a remote store), which
// also carries the confirmations waiting then; without one, messages are
// stored one call each.
//
// Confirmations are written behind: at most one call of their own is in
// flight, the latest one of each qualifier wins, and a failed one is
// retried without failing the controller.

// Settings are the durable queue fields of delivery.ProducerSettings,
// with its defaults applied.
type Settings struct {
	DurableQueueRequestTimeout time.Duration
	DurableQueueRetryAttempts  int
	DurableQueueRetryBackoff   time.Duration
}

type durableOp uint8

const (
	opLoad durableOp = iota + 1
	opStoreSent
	opStoreConfirmed
	opRenew
)

// describe names a call for errors and logs: n is how many messages a
// store of several stores from seqNr on.
func (op durableOp) describe(seqNr durable.SeqNr, n int) string {
	switch {
	case op == opLoad:
		return op.String()
	case op == opStoreSent && n > 1:
		return fmt.Sprintf("store messages sent %d-%d", seqNr, seqNr+durable.SeqNr(n)-1)
	}
	return fmt.Sprintf("%s %d", op, seqNr)
}

// maxBatch is the most messages one call of a durable.BatchQueue stores:
// it bounds a call's size when a slow store lets many accumulate.
const maxBatch = 512

func (op durableOp) String() string {
	switch op {
	case opLoad:
		return "load state"
	case opStoreSent:
		return "store message sent"
	case opStoreConfirmed:
		return "store message confirmed"
	case opRenew:
		return "renew the lease"
	}
	return "unknown"
}

// Msg is the outcome of a durable queue call, or one of its timers.
// Every controller with a durable queue handles it.
type Msg[A any] struct {
	op      durableOp
	attempt int
	seqNr   durable.SeqNr
	state   durable.State[A]
	err     error
	timeout bool   // the call's deadline passed
	retry   bool   // the backoff before another attempt has passed
	tick    bool   // time to renew the lease
	flush   func() // Drain's last stage: store the confirmations, then call it
}

type durableTimerKey struct {
	op    durableOp
	retry bool
}

// durableCall is the attempt in flight of one kind of call.
type durableCall struct {
	attempt int
	seqNr   durable.SeqNr
	n       int                // messages a store stores from seqNr on; 0 when none is under way
	cancel  context.CancelFunc // nil when no call is in flight
}

// Outcome is what a Msg means to the controller: at most one
// field is set.
type Outcome[A any] struct {
	Loaded *durable.State[A] // the state is loaded
	Stored int               // so many more of the messages of StoreSent are stored, in order
	Err    error             // the queue keeps failing: the controller must fail
}

// confirmation is the write-behind state of one qualifier.
type confirmation struct {
	wanted, stored durable.SeqNr
	queued         bool // in confirmQueue
}

// Calls is one controller's client of its durable queue. It is used
// only on the controller's goroutine; T is the controller's message type,
// to which wrap converts each Msg[A].
type Calls[A, T any] struct {
	q     durable.Queue[A]
	batch durable.BatchQueue[A] // q, when it takes batches; nil otherwise
	owned durable.Owned         // q, when it is owned by a lease; nil otherwise
	// standby is set while another controller owns the queue: the load is
	// tried again when its lease would lapse.
	standby bool
	// lease is the real-time timer of the lease's next renewal, or of a
	// standby's next load (see owned.go).
	lease  *time.Timer
	id     string // the producer id, for errors
	s      Settings
	log    *slog.Logger
	self   runtime.Ref[T]
	timers *runtime.Timers[T]
	clock  clockwork.Clock
	wrap   func(Msg[A]) T
	jobs   chan func() // loads and stores
	cjobs  chan func() // confirmations, so that they never hold up a store
	base   context.Context
	cancel context.CancelFunc

	load, sent, confirm, renew durableCall
	// toStore are the messages given to storeSent and not yet stored,
	// oldest first; the call of sent stores the first sent.n of them.
	toStore      ring.Ring[durable.MessageSent[A]]
	riding       []durable.QualifiedConfirmation // the confirmations in the call of sent
	confirmQ     string                          // the qualifier of the confirmation in flight
	confirms     map[string]*confirmation
	confirmQueue ring.Ring[string] // qualifiers with a confirmation to store, oldest first
	flushes      []func()          // Drain's, waiting for every confirmation to be stored
	undrain      func()            // leaves Drain's last stage
}

// Start starts the client of a controller whose Started signal
// is being handled with ctx.
func Start[A, T any](ctx *runtime.Context[T], q durable.Queue[A], id string, s Settings,
	log *slog.Logger, wrap func(Msg[A]) T) *Calls[A, T] {
	base, cancel := context.WithCancel(context.Background())
	// Calls are few at a time (a load or a store, a confirmation, and any
	// that timed out but have not yet returned), so the buffers never fill
	// unless the queue ignores the cancelled contexts of many calls.
	d := &Calls[A, T]{
		q: q, id: id, s: s, log: log, self: ctx.Self(), timers: ctx.Timers(), clock: ctx.System().Clock(), wrap: wrap,
		jobs: make(chan func(), 32), cjobs: make(chan func(), 32), base: base, cancel: cancel,
		confirms: make(map[string]*confirmation),
	}
	d.batch, _ = q.(durable.BatchQueue[A])
	d.owned, _ = q.(durable.Owned)
	self := d.self
	d.undrain = drain.Register(ctx.System(), drain.Queues, func(done func()) { self.Tell(wrap(Msg[A]{flush: done})) })
	for _, jobs := range []chan func(){d.jobs, d.cjobs} {
		go func() {
			for job := range jobs {
				job()
			}
		}()
	}
	return d
}

// Stop aborts the calls in flight, ends the goroutines and releases the
// lease of an owned queue.
func (d *Calls[A, T]) Stop() {
	d.LeaveDrain()
	d.cancel()
	close(d.jobs)
	close(d.cjobs)
	d.release()
}

// call runs f on the queue's goroutine with a context that the controller
// cancels when the deadline passes, and arms that deadline.
func (d *Calls[A, T]) call(c *durableCall, op durableOp, f func(ctx context.Context) Msg[A]) {
	ctx, cancel := context.WithCancel(d.base)
	c.cancel = cancel
	attempt, seqNr, n, self, wrap := c.attempt, c.seqNr, c.n, d.self, d.wrap
	jobs := d.jobs
	if op == opStoreConfirmed || op == opRenew {
		jobs = d.cjobs
	}
	jobs <- func() {
		m := callQueue(ctx, op, seqNr, n, f)
		m.op, m.attempt = op, attempt
		self.Tell(wrap(m))
	}
	d.timers.StartSingle(durableTimerKey{op: op}, wrap(Msg[A]{op: op, attempt: attempt, seqNr: c.seqNr, timeout: true}),
		d.s.DurableQueueRequestTimeout)
}

// callQueue runs f, turning a panic of the queue into the call's error: a
// queue that panics fails its controller, as one that keeps failing does,
// instead of taking the process down with the queue's goroutine.
func callQueue[A any](ctx context.Context, op durableOp, seqNr durable.SeqNr, n int, f func(ctx context.Context) Msg[A]) (m Msg[A]) {
	defer func() {
		if r := recover(); r != nil {
			m = Msg[A]{seqNr: seqNr, err: fmt.Errorf("%w: %s panicked: %v", ErrQueuePanicked, op.describe(seqNr, n), r)}
		}
	}()
	return f(ctx)
}

// ErrQueuePanicked is wrapped by the error of a call whose queue panicked.
var ErrQueuePanicked = errors.New("durable queue panicked")

// LoadState loads the queue's state; the outcome is loaded.
func (d *Calls[A, T]) LoadState() {
	d.load.attempt = 1
	d.issueLoad()
}

func (d *Calls[A, T]) issueLoad() {
	d.call(&d.load, opLoad, func(ctx context.Context) Msg[A] {
		s, err := d.q.LoadState(ctx)
		return Msg[A]{state: s, err: err}
	})
}

// Storing reports whether a message of StoreSent is not yet stored.
func (d *Calls[A, T]) Storing() bool { return d.toStore.Len() > 0 }

// StoreSent stores m, whose sequence number follows that of the previous
// one; the outcome is stored, in order, once m and those before it are.
func (d *Calls[A, T]) StoreSent(m durable.MessageSent[A]) {
	d.toStore.Push(m)
	if d.sent.n == 0 {
		d.startStore()
	}
}

// startStore stores the messages waiting: all of them (up to maxBatch) in
// one call with a BatchQueue, the oldest otherwise.
func (d *Calls[A, T]) startStore() {
	n := 1
	if d.batch != nil {
		n = min(d.toStore.Len(), maxBatch)
	}
	d.sent.attempt, d.sent.seqNr, d.sent.n = 1, d.toStore.At(0).SeqNr, n
	d.issueStoreSent()
}

// issueStoreSent makes an attempt at the store under way: every attempt
// stores the same messages, so the queue can tell a retry of a call that
// stored from a wrong sequence number.
func (d *Calls[A, T]) issueStoreSent() {
	if d.batch == nil {
		m, q := d.toStore.At(0), d.q
		d.call(&d.sent, opStoreSent, func(ctx context.Context) Msg[A] {
			return Msg[A]{err: q.StoreMessageSent(ctx, m)}
		})
		return
	}
	b := durable.Batch[A]{Sent: make([]durable.MessageSent[A], d.sent.n), Confirmed: d.takeConfirms()}
	for i := range b.Sent {
		b.Sent[i] = d.toStore.At(i)
	}
	d.riding = b.Confirmed
	q := d.batch
	d.call(&d.sent, opStoreSent, func(ctx context.Context) Msg[A] {
		return Msg[A]{err: q.StoreBatch(ctx, b)}
	})
}

// stored takes the outcome of a store that succeeded, starts the next one
// if messages are waiting, and returns how many messages it stored.
func (d *Calls[A, T]) stored() int {
	n := d.sent.n
	for range n {
		d.toStore.Pop()
	}
	d.sent.n = 0
	if d.toStore.Len() > 0 {
		d.startStore()
	}
	d.maybeIssueConfirm()
	return n
}

// Handle takes the outcome of a call, its deadline or its backoff, and
// says what it means to the controller.
func (d *Calls[A, T]) Handle(m Msg[A]) (out Outcome[A]) {
	if m.flush != nil {
		d.flush(m.flush)
		return Outcome[A]{}
	}
	defer func() {
		if out.Err != nil {
			d.LeaveDrain() // the controller fails
		} else {
			d.checkFlushed()
		}
	}()
	var c *durableCall
	if m.tick {
		if d.renew.cancel == nil {
			d.renew.attempt++
			d.issueRenew()
		}
		d.renewLater()
		return Outcome[A]{}
	}
	switch m.op {
	case opRenew:
		c = &d.renew
	case opLoad:
		c = &d.load
	case opStoreSent:
		c = &d.sent
	case opStoreConfirmed:
		c = &d.confirm
	default:
		return Outcome[A]{}
	}
	if m.attempt != c.attempt {
		return Outcome[A]{} // an attempt given up on
	}
	if m.retry {
		d.retry(m.op)
		return Outcome[A]{}
	}
	if c.cancel == nil {
		return Outcome[A]{} // the outcome of an attempt that already timed out
	}
	c.cancel()
	c.cancel = nil
	if m.timeout {
		m.err = fmt.Errorf("%w: no answer within %v", context.DeadlineExceeded, d.s.DurableQueueRequestTimeout)
	} else {
		d.timers.Cancel(durableTimerKey{op: m.op})
	}
	if m.op == opStoreSent {
		d.landRiding(m.err == nil)
	}
	if m.err != nil {
		return Outcome[A]{Err: d.failed(c, m)}
	}
	switch m.op {
	case opLoad:
		d.loaded()
		return Outcome[A]{Loaded: &m.state}
	case opRenew:
		return Outcome[A]{}
	case opStoreSent:
		return Outcome[A]{Stored: d.stored()}
	default:
		if conf := d.confirms[d.confirmQ]; conf != nil {
			conf.stored = max(conf.stored, m.seqNr)
		}
		d.requeueConfirm()
		d.issueStoreConfirmed()
		return Outcome[A]{}
	}
}

// failed retries a failed call, at once after a timeout and after a
// backoff otherwise, or returns the error that fails the controller when
// the attempts are spent.
func (d *Calls[A, T]) failed(c *durableCall, m Msg[A]) error {
	s := d.s
	if errors.Is(m.err, ErrQueuePanicked) {
		return fmt.Errorf("durable queue of producer %q: %w", d.id, m.err) // a bug, not an outage: no retry
	}
	if errors.Is(m.err, durable.ErrFenced) {
		return fmt.Errorf("durable queue of producer %q: %s: %w: this controller is deposed", d.id, m.op.describe(c.seqNr, c.n), m.err)
	}
	if owned := (*durable.OwnedError)(nil); m.op == opLoad && errors.As(m.err, &owned) {
		d.standBy(owned)
		return nil
	}
	if m.op == opRenew {
		d.log.Warn("durable queue: renewing the lease failed; will retry", "err", m.err)
		return nil
	}
	if m.op == opStoreConfirmed {
		d.log.Warn("durable queue: storing a confirmation failed; will retry", "seqNr", c.seqNr, "qualifier", d.confirmQ, "err", m.err)
		d.requeueConfirm()
		d.timers.StartSingle(durableTimerKey{op: m.op, retry: true},
			d.wrap(Msg[A]{op: m.op, attempt: c.attempt, retry: true}), s.DurableQueueRetryBackoff)
		return nil
	}
	if errors.Is(m.err, durable.ErrUnexpectedSeqNr) {
		return fmt.Errorf("durable queue: %s: %w (is another producer controller using producer id %q?)", m.op.describe(c.seqNr, c.n), m.err, d.id)
	}
	if c.attempt > s.DurableQueueRetryAttempts {
		return fmt.Errorf("durable queue: %s: gave up after %d attempts: %w", m.op.describe(c.seqNr, c.n), c.attempt, m.err)
	}
	d.log.Warn("durable queue: call failed; will retry", "call", m.op.describe(c.seqNr, c.n), "attempt", c.attempt, "err", m.err)
	c.attempt++
	if m.timeout || s.DurableQueueRetryBackoff == 0 {
		d.retry(m.op)
		return nil
	}
	d.timers.StartSingle(durableTimerKey{op: m.op, retry: true},
		d.wrap(Msg[A]{op: m.op, attempt: c.attempt, retry: true}), s.DurableQueueRetryBackoff)
	return nil
}

func (d *Calls[A, T]) retry(op durableOp) {
	switch op {
	case opLoad:
		d.issueLoad()
	case opStoreSent:
		d.issueStoreSent()
	case opStoreConfirmed:
		d.issueStoreConfirmed()
	case opRenew:
		d.issueRenew()
	}
}

// Now is the time stamp of a stored message.
func (d *Calls[A, T]) Now() time.Time { return d.clock.Now() }
