package trellis

import (
	"context"
	"errors"
	"sync"

	"github.com/trellis-go/trellis/delivery"
)

// maxRememberedSends bounds the sends an owner remembers by id: a sender
// makes a send again within its own context (seconds), while this many
// other sends come through this owner. At about 100 bytes each, 6.5 MB at
// most.
const maxRememberedSends = 1 << 16

// rememberedSends is what a queue's owner remembers of the sends other
// instances handed it, by the id the sender gave the send: so that a send
// made again, after its first hand-over broke off with no answer (a cut
// connection), is stored once and answered with the first one's sequence
// number. The oldest are forgotten past maxRememberedSends; a new owner
// remembers none of its predecessor's.
type rememberedSends struct {
	mu    sync.Mutex
	limit int
	byID  map[string]*rememberedSend
	order []remembered // oldest first, from head
	head  int
}

// remembered is a place in the order: the send recorded under id then.
type remembered struct {
	id string
	s  *rememberedSend
}

// rememberedSend is one send: done closes once it is stored or failed.
type rememberedSend struct {
	done  chan struct{}
	seqNr delivery.SeqNr
	err   error
}

func newRememberedSends(limit int) *rememberedSends {
	return &rememberedSends{limit: limit, byID: make(map[string]*rememberedSend)}
}

// do runs send for id once: a later call with the same id, or one while
// the first runs, waits for it and gets its answer. A send that surely
// stored nothing (notStored) is forgotten, so that the next call with its
// id runs it again. An empty id (a sender that gives none) always runs
// send.
func (r *rememberedSends) do(ctx context.Context, id string, send func() (delivery.SeqNr, error)) (delivery.SeqNr, error) {
	if id == "" {
		return send()
	}
	r.mu.Lock()
	if s, ok := r.byID[id]; ok {
		r.mu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if notStored(s.err) {
			return r.do(ctx, id, send) // forgotten: run it here
		}
		return s.seqNr, s.err
	}
	s := &rememberedSend{done: make(chan struct{})}
	r.add(id, s)
	r.mu.Unlock()

	s.seqNr, s.err = send()
	if notStored(s.err) {
		r.mu.Lock()
		if r.byID[id] == s {
			delete(r.byID, id)
		}
		r.mu.Unlock()
	}
	close(s.done)
	return s.seqNr, s.err
}

// add records s under id, forgetting the oldest past the limit. The
// caller holds mu.
func (r *rememberedSends) add(id string, s *rememberedSend) {
	r.byID[id] = s
	if len(r.order) < r.limit {
		r.order = append(r.order, remembered{id, s})
		return
	}
	if old := r.order[r.head]; r.byID[old.id] == old.s {
		delete(r.byID, old.id)
	}
	r.order[r.head] = remembered{id, s}
	r.head = (r.head + 1) % r.limit
}

// notStored says that a send's error leaves its message surely not
// stored: a later send of it stores it once.
func notStored(err error) bool {
	return errors.Is(err, delivery.ErrNotSent) || errors.Is(err, delivery.ErrProducerStopped)
}
