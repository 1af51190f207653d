package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/trellis-go/trellis/delivery/durable"
)

// The producer controller calls its durable queue from a goroutine of its
// own, one call at a time, so that a slow store never blocks the runtime's
// workers, and hears of each result as a message. Each call has a deadline
// on the system's clock (an actor timer, so tests drive it with a fake
// clock); a call that fails or times out is tried again, up to
// DurableQueueRetryAttempts more times, after which the controller fails.
// Confirmations are written behind: at most one is in flight, the latest
// one wins, and a failed one is retried without failing the controller.

type durableOp uint8

const (
	opLoad durableOp = iota + 1
	opStoreSent
	opStoreConfirmed
)

// describe names a call for errors and logs.
func (op durableOp) describe(seqNr SeqNr) string {
	if op == opLoad {
		return op.String()
	}
	return fmt.Sprintf("%s %d", op, seqNr)
}

func (op durableOp) String() string {
	switch op {
	case opLoad:
		return "load state"
	case opStoreSent:
		return "store message sent"
	case opStoreConfirmed:
		return "store message confirmed"
	}
	return "unknown"
}

// durableMsg is the outcome of a durable queue call, or one of its timers.
type durableMsg[A any] struct {
	op      durableOp
	attempt int
	seqNr   SeqNr
	state   durable.State[A]
	err     error
	timeout bool // the call's deadline passed
	retry   bool // the backoff before another attempt has passed
}

func (durableMsg[A]) producerCommand(A) {}

type durableTimerKey struct {
	op    durableOp
	retry bool
}

// durableCall is the attempt in flight of one kind of call.
type durableCall struct {
	attempt int
	seqNr   SeqNr
	cancel  context.CancelFunc // nil when no call is in flight
}

type durableClient[A any] struct {
	q      durable.Queue[A]
	jobs   chan func()
	base   context.Context
	cancel context.CancelFunc

	load      durableCall
	sent      durableCall
	storingM  *SequencedMessage[A] // the message being stored, nil if none
	confirm   durableCall
	confirmed SeqNr // the highest confirmation stored
	wanted    SeqNr // the highest confirmation to store
}

func startDurableClient[A any](p *producer[A]) *durableClient[A] {
	base, cancel := context.WithCancel(context.Background())
	// Calls are few at a time (a load or a store, a confirmation, and any
	// that timed out but have not yet returned), so the buffer never fills
	// unless the queue ignores the cancelled contexts of many calls.
	d := &durableClient[A]{q: p.cfg.queue, jobs: make(chan func(), 32), base: base, cancel: cancel}
	go func() {
		for job := range d.jobs {
			job()
		}
	}()
	return d
}

// stop aborts the call in flight and ends the goroutine.
func (d *durableClient[A]) stop() {
	d.cancel()
	close(d.jobs)
}

// call runs f on the queue's goroutine with a context that the controller
// cancels when the deadline passes, and arms that deadline.
func (p *producer[A]) call(c *durableCall, op durableOp, f func(ctx context.Context) durableMsg[A]) {
	ctx, cancel := context.WithCancel(p.dq.base)
	c.cancel = cancel
	attempt, self := c.attempt, p.self
	p.dq.jobs <- func() {
		m := f(ctx)
		m.op, m.attempt = op, attempt
		self.Tell(m)
	}
	p.ctx.Timers().StartSingle(durableTimerKey{op: op}, durableMsg[A]{op: op, attempt: attempt, seqNr: c.seqNr, timeout: true},
		p.cfg.settings.DurableQueueRequestTimeout)
}

func (p *producer[A]) storing() bool { return p.dq != nil && p.dq.storingM != nil }

func (p *producer[A]) load(attempt int) {
	p.dq.load.attempt = attempt
	p.call(&p.dq.load, opLoad, func(ctx context.Context) durableMsg[A] {
		s, err := p.dq.q.LoadState(ctx)
		return durableMsg[A]{state: s, err: err}
	})
}

func (p *producer[A]) storeSent(m *SequencedMessage[A]) {
	p.dq.storingM = m
	p.dq.sent.attempt, p.dq.sent.seqNr = 1, m.SeqNr
	p.issueStoreSent()
}

func (p *producer[A]) issueStoreSent() {
	m := p.dq.storingM
	sent := durable.MessageSent[A]{
		SeqNr:     m.SeqNr,
		Message:   m.Message,
		Chunk:     m.Chunk,
		Ack:       m.Ack,
		Qualifier: durable.NoQualifier,
		Timestamp: p.ctx.System().Clock().Now(),
	}
	q := p.dq.q
	p.call(&p.dq.sent, opStoreSent, func(ctx context.Context) durableMsg[A] {
		return durableMsg[A]{seqNr: sent.SeqNr, err: q.StoreMessageSent(ctx, sent)}
	})
}

// storeConfirmed stores confirmation c, behind the flow of messages.
func (p *producer[A]) storeConfirmed(c SeqNr) {
	p.dq.wanted = max(p.dq.wanted, c)
	if p.dq.confirm.cancel == nil && !p.ctx.Timers().IsActive(durableTimerKey{op: opStoreConfirmed, retry: true}) {
		p.issueStoreConfirmed()
	}
}

func (p *producer[A]) issueStoreConfirmed() {
	if p.dq.wanted <= p.dq.confirmed {
		return
	}
	seqNr, now, q := p.dq.wanted, p.ctx.System().Clock().Now(), p.dq.q
	p.dq.confirm.attempt++
	p.dq.confirm.seqNr = seqNr
	p.call(&p.dq.confirm, opStoreConfirmed, func(ctx context.Context) durableMsg[A] {
		return durableMsg[A]{seqNr: seqNr, err: q.StoreMessageConfirmed(ctx, seqNr, durable.NoQualifier, now)}
	})
}

// onDurable handles the outcome of a call, its deadline and its backoff.
func (p *producer[A]) onDurable(m durableMsg[A]) {
	if p.dq == nil {
		return
	}
	var c *durableCall
	switch m.op {
	case opLoad:
		c = &p.dq.load
	case opStoreSent:
		c = &p.dq.sent
	case opStoreConfirmed:
		c = &p.dq.confirm
	default:
		return
	}
	if m.attempt != c.attempt {
		return // an attempt given up on
	}
	if m.retry {
		p.retryDurable(m.op)
		return
	}
	if c.cancel == nil {
		return // the outcome of an attempt that already timed out
	}
	c.cancel()
	c.cancel = nil
	if m.timeout {
		m.err = fmt.Errorf("%w: no answer within %v", context.DeadlineExceeded, p.cfg.settings.DurableQueueRequestTimeout)
	} else {
		p.ctx.Timers().Cancel(durableTimerKey{op: m.op})
	}
	if m.err != nil {
		p.durableFailed(c, m)
		return
	}
	switch m.op {
	case opLoad:
		p.onLoaded(m.state)
	case opStoreSent:
		p.dq.storingM = nil
		p.emit()
		p.sendPending()
	case opStoreConfirmed:
		p.dq.confirmed = max(p.dq.confirmed, m.seqNr)
		p.issueStoreConfirmed()
	}
}

// durableFailed retries a failed call, at once after a timeout and after a
// backoff otherwise, or fails the controller when the attempts are spent.
func (p *producer[A]) durableFailed(c *durableCall, m durableMsg[A]) {
	s := p.cfg.settings
	if m.op == opStoreConfirmed {
		p.log.Warn("durable queue: storing a confirmation failed; will retry", "seqNr", c.seqNr, "error", m.err)
		p.ctx.Timers().StartSingle(durableTimerKey{op: m.op, retry: true},
			durableMsg[A]{op: m.op, attempt: c.attempt, retry: true}, s.DurableQueueRetryBackoff)
		return
	}
	if errors.Is(m.err, durable.ErrUnexpectedSeqNr) {
		p.fail(fmt.Errorf("durable queue: %s: %w (is another producer controller using producer id %q?)", m.op.describe(c.seqNr), m.err, p.cfg.id))
		return
	}
	if c.attempt > s.DurableQueueRetryAttempts {
		p.fail(fmt.Errorf("durable queue: %s: gave up after %d attempts: %w", m.op.describe(c.seqNr), c.attempt, m.err))
		return
	}
	p.log.Warn("durable queue: call failed; will retry", "call", m.op.describe(c.seqNr), "attempt", c.attempt, "error", m.err)
	c.attempt++
	if m.timeout || s.DurableQueueRetryBackoff == 0 {
		p.retryDurable(m.op)
		return
	}
	p.ctx.Timers().StartSingle(durableTimerKey{op: m.op, retry: true},
		durableMsg[A]{op: m.op, attempt: c.attempt, retry: true}, s.DurableQueueRetryBackoff)
}

func (p *producer[A]) retryDurable(op durableOp) {
	switch op {
	case opLoad:
		p.load(p.dq.load.attempt)
	case opStoreSent:
		p.issueStoreSent()
	case opStoreConfirmed:
		p.issueStoreConfirmed()
	}
}

// onLoaded takes the stored state: unconfirmed messages keep their
// sequence numbers and are sent again when the controller is active.
func (p *producer[A]) onLoaded(s durable.State[A]) {
	s = s.DropPartialChunks()
	p.currentSeqNr = max(s.CurrentSeqNr, 1)
	p.confirmedSeqNr = s.HighestConfirmedSeqNr
	p.dq.confirmed, p.dq.wanted = s.HighestConfirmedSeqNr, s.HighestConfirmedSeqNr
	for _, u := range s.Unconfirmed {
		p.unconfirmed.push(&SequencedMessage[A]{
			ProducerID:         p.cfg.id,
			SeqNr:              u.SeqNr,
			Message:            u.Message,
			Chunk:              u.Chunk,
			Ack:                u.Ack,
			ProducerController: p.self,
			Incarnation:        p.incarnation,
		})
	}
	p.loaded = true
	if n := p.unconfirmed.len(); n > 0 {
		p.log.Info("durable queue loaded", "currentSeqNr", p.currentSeqNr, "unconfirmed", n,
			"from", p.unconfirmed.at(0).SeqNr)
	}
	p.maybeActivate()
}
