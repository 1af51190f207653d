package peer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// Receiver takes the messages told to this instance's actors (see
// [Client.Tell]): those of one client in the order told, one at a time;
// those of different clients concurrently. It should hand the message
// on (to a mailbox) and return, as the stream waits for it. msg is its
// to keep.
type Receiver func(actorPath string, msg []byte)

// serveTell authenticates a tell stream, answers its headers at once (the
// client waits for them before it writes), then delivers its lines in
// order until the client ends it, a line fails its check, a newer stream
// of the same client arrives, or the server shuts down. Why it ended, if
// not by the client, is written in the body.
func (s *Server) serveTell(w http.ResponseWriter, r *http.Request) {
	sig, ok := s.checkStream(w, r, "tell")
	if !ok {
		return
	}
	if s.cfg.Receive == nil {
		s.fail(w, sig, NewError(KindNotFound, "", "this peer takes no tells (ServerConfig.Receive is nil)"))
		return
	}
	clientID, epoch, err := parseTellPath(r.RequestURI)
	if err != nil {
		s.fail(w, sig, NewError(KindBadRequest, "", "%v", err))
		return
	}
	order := s.tellOrder.enter(clientID, epoch)
	defer s.tellOrder.leave(clientID, order)
	stop := context.AfterFunc(s.stopping, func() { r.Body.Close() }) // ends the Scan below
	defer stop()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(headerSignature, s.signer.signReply(sig, http.StatusOK, nil))
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush() // a gone sender shows as a read error next

	if err := s.deliver(r, sig, epoch, order); err != nil {
		s.log.Debug("peer: tell stream ended", "remote", r.RemoteAddr, "err", err)
		_, _ = w.Write(mustJSON(classify(err)))
	}
}

// deliver reads a stream's lines, checking each one's place and each
// batch's signature (see tellMAC), and hands the lines of a batch to
// Receive once its signature checks; nil when the client ended the
// stream.
func (s *Server) deliver(r *http.Request, streamSig string, epoch uint64, order *clientOrder) error {
	sc := bufio.NewScanner(r.Body)
	// A line is its message in base64 (4/3 of it) and a few short fields.
	sc.Buffer(make([]byte, 0, 4<<10), int(s.cfg.MaxBodyBytes/3*4+4<<10))
	mac := s.signer.newTellMAC(streamSig)
	defer mac.release()
	var line tellLine
	var batch []tellLine // the open batch's lines, unchecked
	var want []byte      // the signature the batch must carry
	refuse := func(seq uint64, why string) error {
		s.log.Warn("peer: tell line refused", "remote", r.RemoteAddr, "seq", seq, "why", why)
		return NewError(KindUnauthorized, "", "line %d: %s", seq, why)
	}
	for seq := uint64(1); sc.Scan(); seq++ {
		sig, err := parseTellLine(sc.Bytes(), &line, line.To)
		switch {
		case err != nil:
			return NewError(KindBadRequest, "", "line %d: %v", seq, err)
		case line.Seq != seq:
			return refuse(seq, "out of place")
		case mac.full():
			return refuse(seq, "the batch goes past its bounds unsigned")
		}
		if err := checkActorPath(line.To); err != nil {
			return NewError(KindBadRequest, "", "line %d: %v", seq, err)
		}
		mac.add(line.Seq, line.To, line.Msg)
		batch = append(batch, line)
		if len(sig) == 0 {
			continue
		}
		if want = mac.appendSum(want[:0]); !equalSig(sig, want) {
			return refuse(seq, "bad signature on the batch it ends")
		}
		if !order.deliver(epoch, func() {
			for _, l := range batch {
				s.cfg.Receive(l.To, l.Msg)
			}
		}) {
			return NewError(KindUnavailable, "", "a newer stream from the same client took over")
		}
		clear(batch) // Receive keeps the messages; the batch does not
		batch = batch[:0]
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return tooLarge("told message", s.cfg.MaxBodyBytes)
	case s.stopping.Err() != nil:
		return NewError(KindUnavailable, "", "the server is shutting down")
	case err != nil:
		return fmt.Errorf("read the stream: %w", err)
	case mac.open() > 0:
		return NewError(KindBadRequest, "", "the stream ended within a batch: its %d lines were not delivered", mac.open())
	}
	return nil
}

// tellOrders keeps each client's messages in order across its streams:
// only its newest stream delivers.
type tellOrders struct {
	mu      sync.Mutex
	clients map[string]*clientOrder
}

// clientOrder is one client's newest stream; its lock is held while a
// message is delivered, so one client's messages are delivered one at a
// time.
type clientOrder struct {
	streams int // open streams of the client; guarded by tellOrders.mu

	mu     sync.Mutex
	newest uint64 // epoch
}

// enter registers a stream of the given epoch of a client.
func (o *tellOrders) enter(clientID string, epoch uint64) *clientOrder {
	o.mu.Lock()
	c := o.clients[clientID]
	if c == nil {
		if o.clients == nil {
			o.clients = map[string]*clientOrder{}
		}
		c = &clientOrder{}
		o.clients[clientID] = c
	}
	c.streams++
	o.mu.Unlock()
	c.mu.Lock()
	c.newest = max(c.newest, epoch)
	c.mu.Unlock()
	return c
}

// leave forgets a stream; the client is forgotten with its last stream.
func (o *tellOrders) leave(clientID string, c *clientOrder) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.streams--; c.streams == 0 {
		delete(o.clients, clientID)
	}
}

// deliver runs f unless a newer stream than epoch has arrived.
func (c *clientOrder) deliver(epoch uint64, f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.newest != epoch {
		return false
	}
	f()
	return true
}
