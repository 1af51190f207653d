package durable

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SeqNr is a message's sequence number. The first message of a producer is
// number 1; 0 means "none".
type SeqNr = int64

// NoQualifier is the qualifier of point-to-point delivery, where all
// messages go to one consumer. Work pulling and sharding qualify each
// message with the worker or the entity it was sent to.
const NoQualifier = ""

// ErrUnexpectedSeqNr is wrapped by the error of StoreMessageSent for a
// sequence number that is neither the queue's current one nor the one just
// before it: the producer and the store disagree about what was sent.
var ErrUnexpectedSeqNr = errors.New("durable: unexpected sequence number")

// Queue stores what one producer has sent and what its consumers have
// confirmed, so that a new producer controller with the same producer id can
// send the unconfirmed messages again. One queue serves one producer id, and
// one producer controller at a time: a queue shared by processes enforces
// that by being [Owned] (the Redis queue is). A controller makes one load or store of
// sent messages at a time and, beside it, at most one store of
// confirmations, so that confirming never holds up sending: a Queue must be
// safe for those two calls overlapping, and keep the higher confirmation of
// a qualifier whichever call lands last.
//
// Every method must honour ctx: the controller gives each call a deadline
// and retries it when the deadline passes.
type Queue[A any] interface {
	// LoadState returns what was stored, or [EmptyState] for a queue that
	// has never been written, and starts a new incarnation: the returned
	// State.Incarnation is higher than any an earlier LoadState of the
	// queue returned (a load that failed may still have used up a number).
	// A producer controller loads once, when it starts, so the number
	// orders the producer controllers of one producer id: consumers go by
	// it never to go back to an earlier one.
	LoadState(ctx context.Context) (State[A], error)

	// StoreMessageSent stores m if m.SeqNr is the queue's current sequence
	// number, which it then increments. It is idempotent, because a call
	// may time out after it stored: for the sequence number just before the
	// current one it returns nil without storing. A producer that died
	// while it stored the chunks of a message starts again at the first of
	// them (see [State.DropPartialChunks]): m.SeqNr equal to the first of a
	// trailing run of chunks without a last chunk drops that run and
	// stores m in its place. Any other sequence number is an error
	// wrapping [ErrUnexpectedSeqNr].
	StoreMessageSent(ctx context.Context, m MessageSent[A]) error

	// StoreMessageConfirmed records that the messages of qualifier up to
	// and including seqNr were confirmed: they are no longer unconfirmed,
	// and the highest confirmed sequence number rises to seqNr if it is
	// lower. A seqNr at or below what is stored for qualifier changes
	// nothing. Confirmations are written behind delivery: one that is lost
	// makes the messages it covers be delivered again after a restart.
	StoreMessageConfirmed(ctx context.Context, seqNr SeqNr, qualifier string, at time.Time) error
}

// MessageSent is a stored message: either a whole Message or, when the
// producer controller chunks large messages, one Chunk of one.
type MessageSent[A any] struct {
	SeqNr SeqNr
	// Message is the producer's message; its zero value when Chunk is set.
	Message A
	// Chunk is a piece of the serialized message, or nil for a whole one.
	Chunk *Chunk
	// Ack says the producer asked for a confirmation reply; with chunks
	// only the last one carries it.
	Ack       bool
	Qualifier string
	Timestamp time.Time
	// Trace is the W3C trace context of the send (see
	// delivery.SequencedMessage.TraceContext), "" when it was untraced:
	// stored with the message, so that a resend after a restart keeps
	// the trace.
	Trace string
}

// Chunk is a piece of a serialized message. A message that fits in one
// chunk is a single chunk that is both First and Last.
type Chunk struct {
	Data  []byte
	First bool
	Last  bool
	// Manifest names the codec that serialized the message.
	Manifest string
}

// Confirmation is the highest confirmed sequence number of one qualifier
// and when it was confirmed.
type Confirmation struct {
	SeqNr     SeqNr
	Timestamp time.Time
}

// State is what a Queue holds.
type State[A any] struct {
	// CurrentSeqNr is the number the next stored message will have.
	CurrentSeqNr SeqNr
	// HighestConfirmedSeqNr is the highest sequence number confirmed for
	// any qualifier.
	HighestConfirmedSeqNr SeqNr
	// Confirmed is the confirmation of each qualifier that has one.
	Confirmed map[string]Confirmation
	// Unconfirmed are the stored messages not yet confirmed, by sequence
	// number.
	Unconfirmed []MessageSent[A]
	// Incarnation numbers the loads of the queue, from 1 (see
	// Queue.LoadState); 0 in a state that was not loaded.
	Incarnation uint64
}

// EmptyState is the state of a queue that has never been written:
// (1, 0, {}, []).
func EmptyState[A any]() State[A] {
	return State[A]{CurrentSeqNr: 1, Confirmed: map[string]Confirmation{}}
}

// DropPartialChunks returns the state without a trailing run of chunks that
// lacks its last chunk: the producer died while it was storing the pieces
// of one message, which was never sent whole, and a restarted producer
// stores it again from its first chunk. CurrentSeqNr moves back to the
// first dropped chunk.
func (s State[A]) DropPartialChunks() State[A] {
	i := partialChunks(s.Unconfirmed)
	if i == len(s.Unconfirmed) {
		return s
	}
	s.CurrentSeqNr = s.Unconfirmed[i].SeqNr
	s.Unconfirmed = s.Unconfirmed[:i:i]
	return s
}

// partialChunks returns the index in ms where a trailing run of chunks
// without a last chunk begins, or len(ms) if there is none.
func partialChunks[A any](ms []MessageSent[A]) int {
	i := len(ms)
	for i > 0 {
		c := ms[i-1].Chunk
		if c == nil || c.Last {
			break
		}
		i--
		if c.First {
			break
		}
	}
	return i
}

// BatchQueue is a Queue that takes several writes in one call, so that a
// store with a round trip per call (such as Redis) pays one per batch. A
// producer controller whose queue is one stores, while one batch is in
// flight, the messages that come meanwhile, and sends them all in the next
// call, with the confirmations that are waiting. It is discovered by type
// assertion: a Queue that is not one gets one call per write.
type BatchQueue[A any] interface {
	Queue[A]

	// StoreBatch stores b: its sent messages as StoreMessageSent would one
	// after the other, all of them or none, then its confirmations as
	// StoreMessageConfirmed would. The sent messages have consecutive
	// sequence numbers. It is idempotent as StoreMessageSent is: when the
	// last of them is the one just before the queue's current sequence
	// number (an earlier attempt stored the batch), it stores no message,
	// and the confirmations, idempotent themselves, are stored again.
	StoreBatch(ctx context.Context, b Batch[A]) error
}

// Batch is what one StoreBatch call writes.
type Batch[A any] struct {
	Sent      []MessageSent[A]
	Confirmed []QualifiedConfirmation
}

// QualifiedConfirmation is a confirmation of the messages of Qualifier up
// to and including SeqNr (see Queue.StoreMessageConfirmed).
type QualifiedConfirmation struct {
	Qualifier string
	SeqNr     SeqNr
	Timestamp time.Time
}

// CheckConsecutive returns an error unless the sequence numbers of ms
// follow one another: a BatchQueue stores them by the first one's.
func CheckConsecutive[A any](ms []MessageSent[A]) error {
	for i := 1; i < len(ms); i++ {
		if ms[i].SeqNr != ms[0].SeqNr+SeqNr(i) {
			return fmt.Errorf("durable: batch of sent messages from %d: message %d has seqNr %d, not consecutive", ms[0].SeqNr, i, ms[i].SeqNr)
		}
	}
	return nil
}
