package peer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Tell queues msg for the actor at actorPath on the peer at addr and
// returns; the peer's ServerConfig.Receive gets it later, after what this
// client told that peer before, or never (a broken connection loses what
// was in flight). Tell keeps msg: do not change it afterwards. It fails,
// without queuing, with ErrUnavailable when the peer's queue is full
// (TellQueue; the message says why the peer is behind) or the client is
// closed, ErrTooLarge past MaxBodyBytes, ErrBadRequest for a path that is
// empty or holds a line break, and ErrUnauthorized without a secret.
func (c *Client) Tell(addr, actorPath string, msg []byte) error {
	fail := func(e *Error) error {
		e.Op, e.Addr = "tell "+actorPath, addr
		return e
	}
	switch {
	case !c.signer.enabled:
		return fail(&Error{Kind: KindUnauthorized, Message: errNoSecret.Error()})
	case int64(len(msg)) > c.cfg.MaxBodyBytes:
		return fail(tooLarge("message", c.cfg.MaxBodyBytes))
	}
	if err := checkActorPath(actorPath); err != nil {
		return fail(&Error{Kind: KindBadRequest, Message: err.Error()})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return fail(&Error{Kind: KindUnavailable, Message: "the client is closed"})
	}
	s := c.senders[addr]
	if s == nil {
		s = &sender{c: c, addr: addr, queue: make(chan tellMsg, c.cfg.TellQueue)}
		c.senders[addr] = s
		c.wg.Add(1)
		go s.run(c.ctx.Done())
	}
	select {
	case s.queue <- tellMsg{to: actorPath, msg: msg}:
		return nil
	default:
		why := "the peer's queue is full"
		if err := s.lastErr.Load(); err != nil {
			why += "; its stream last failed: " + err.Error()
		}
		return fail(&Error{Kind: KindUnavailable, Message: why})
	}
}

// atomicError holds an error for goroutines to share.
type atomicError struct{ p atomic.Pointer[error] }

func (a *atomicError) Store(err error) { a.p.Store(&err) }

func (a *atomicError) Load() error {
	if p := a.p.Load(); p != nil {
		return *p
	}
	return nil
}

// tellMsg is a queued message.
type tellMsg struct {
	to  string
	msg []byte
}

// sender writes one peer's queue on a stream, opening a new one when the
// last broke (with backoff while the peer cannot be reached), and ends
// when the client closes or after senderIdle (to twice that) without
// messages.
type sender struct {
	c     *Client
	addr  string
	queue chan tellMsg
	epoch uint64 // the last stream's
	// lastErr is why the last stream failed, for Tell to say.
	lastErr atomicError
}

func (s *sender) run(stop <-chan struct{}) {
	defer s.c.wg.Done()
	var st *stream
	defer func() {
		if st != nil {
			st.close()
		}
	}()
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	busy := false // a message was taken since the idle timer last fired
	backoff := minBackoff
	for {
		var m tellMsg
		select {
		case m = <-s.queue: // the next while busy, without the full select
		default:
			select {
			case m = <-s.queue:
			case <-stop:
				return
			case <-idle.C:
				if !busy && s.forget() {
					return
				}
				busy = false
				idle.Reset(senderIdle)
				continue
			}
		}
		busy = true
		if st != nil && st.ended() {
			s.failed(st.why) // what was written since it ended is lost
			st.close()
			st = nil
		}
		for st == nil { // m waits while the peer cannot be reached
			var err error
			if st, err = s.open(); err != nil {
				s.failed(err)
				select {
				case <-stop:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, maxBackoff)
			}
		}
		backoff = minBackoff
		if err := st.write(m, len(s.queue) == 0); err != nil {
			s.failed(err) // what was in the batch is lost
			st.close()
			st = nil
		}
	}
}

// The sender's timings.
var (
	senderIdle = 10 * time.Minute // a sender without messages for this long (to twice that) ends
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// forget removes the sender from its client when its queue is empty; a
// Tell holds the client's lock while it queues, so none is lost.
func (s *sender) forget() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if len(s.queue) > 0 {
		return false
	}
	delete(s.c.senders, s.addr)
	return true
}

func (s *sender) failed(err error) {
	s.lastErr.Store(err)
	s.c.streamFailures.Add(1)
	s.c.cfg.Logger.Debug("peer: tell stream failed", "addr", s.addr, "err", err)
}

// stream is one open tell stream: the lines go through a linePipe into
// the request body; watch reads the response until the server ends it.
type stream struct {
	pipe    *linePipe
	enc     *json.Encoder // for a line appendTellLine cannot write
	buf     []byte        // scratch of appendTellLine
	sigBuf  []byte        // scratch of the batches' signatures
	mac     *tellMAC      // signs the lines in batches, chained to the stream's signature
	seq     uint64
	cancel  context.CancelFunc
	watched chan struct{} // closed when the response has ended
	why     error         // why it ended, once watched is closed
}

// open starts a stream and waits until the server has answered its
// headers, so a peer that cannot be reached or refuses costs no message.
func (s *sender) open() (*stream, error) {
	s.epoch++
	ctx, cancel := context.WithCancel(s.c.ctx) // Close cancels it
	pipe := newLinePipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.c.url(s.addr, tellPath(s.c.id, s.epoch)), pipe)
	if err != nil {
		cancel()
		return nil, err
	}
	ts := strconv.FormatInt(s.c.cfg.Now().UnixMilli(), 10)
	sig := s.c.signer.signRequest(http.MethodPost, req.URL.RequestURI(), ts, "", nil)
	req.Header = http.Header{"Content-Type": {"application/jsonl"}, headerTime: {ts}, headerSignature: {sig}}

	// The request's context lives as long as the stream, so the wait for
	// the answer is bounded by a timer instead.
	timer := time.AfterFunc(s.c.cfg.DialTimeout+s.c.cfg.Health.withDefaults().Timeout, cancel)
	resp, err := s.c.hc.Do(req)
	if !timer.Stop() && err == nil { // it fired just after the answer
		resp.Body.Close()
		err = errors.New("no answer to the stream's opening in time")
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		body, _ := readAll(resp.Body, resp.ContentLength, 64<<10, "refusal")
		resp.Body.Close()
		err = decodeWireError(resp.StatusCode, body)
	}
	if err == nil && !equal(resp.Header.Get(headerSignature), s.c.signer.signReply(sig, http.StatusOK, nil)) {
		resp.Body.Close()
		err = &Error{Kind: KindUnauthorized, Message: "the stream's answer is not signed: not a peer of this cluster"}
	}
	if err != nil {
		cancel()
		pipe.closeWrite()
		return nil, err
	}
	st := &stream{pipe: pipe, enc: json.NewEncoder(pipe), mac: s.c.signer.newTellMAC(sig), cancel: cancel, watched: make(chan struct{})}
	go st.watch(resp)
	return st, nil
}

// watch reads the response to its end (the server writes why it ended
// the stream, if it did) and then breaks the pipe, failing the next
// write.
func (st *stream) watch(resp *http.Response) {
	defer close(st.watched)
	body, err := readAll(resp.Body, -1, 64<<10, "stream's end")
	resp.Body.Close()
	why := errors.New("the peer ended the stream")
	if err != nil {
		why = err
	} else if len(body) > 0 {
		why = decodeWireError(http.StatusOK, body)
	}
	st.why = why
	st.pipe.CloseWithError(why)
}

// ended reports whether the server has ended the stream.
func (st *stream) ended() bool {
	select {
	case <-st.watched:
		return true
	default:
		return false
	}
}

// write encodes m as the stream's next line. last ends the batch (see
// tellMAC): the line carries the batch's signature, and the transport is
// woken to send what is written. The sender ends a batch when its queue
// is empty, so a burst goes out in few frames and few signatures; a batch
// that reaches its bounds ends too.
func (st *stream) write(m tellMsg, last bool) error {
	st.seq++
	st.mac.add(st.seq, m.to, m.msg)
	sig := st.sigBuf[:0]
	if last || st.mac.full() {
		sig = st.mac.appendSum(sig)
		st.sigBuf = sig
	}
	var ok bool
	if st.buf, ok = appendTellLine(st.buf[:0], st.seq, m.to, m.msg, sig); ok {
		if _, err := st.pipe.Write(st.buf); err != nil {
			return err
		}
	} else if err := st.enc.Encode(&tellLine{Seq: st.seq, To: m.to, Msg: m.msg, Sig: string(sig)}); err != nil {
		return err
	}
	if last {
		st.pipe.flush()
	}
	return nil
}

// close ends the request body, so that the server delivers what it has
// and ends the stream; past a bound, or when the stream is broken, it
// cancels it.
func (st *stream) close() {
	st.pipe.closeWrite() // the stream is ending: its reader sees what arrived
	select {
	case <-st.watched:
	case <-time.After(closeGrace):
	}
	st.cancel()
	<-st.watched
	st.mac.release()
}

// closeGrace bounds how long closing a stream waits for the server.
var closeGrace = 5 * time.Second
