package peer

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// callStream is a client's open call stream to one peer (see callline.go):
// forwards write their call lines on it and wait for the reply line of
// the same seq, which read delivers. A call holds one of streamMaxInFlight
// slots from before its line is written until its reply arrives or the
// stream ends, so the client never has more calls unanswered on a stream
// than the server runs at once.
type callStream struct {
	c      *Client
	addr   string
	pipe   *linePipe
	sig    string // the stream's request signature, which lines chain to
	cancel context.CancelFunc
	slots  chan struct{}
	done   chan struct{} // closed when the response has ended

	wmu sync.Mutex    // orders the lines: seq, signature and write together
	enc *json.Encoder // for a line appendCallLine cannot write
	buf []byte        // appendCallLine's, reused under wmu
	seq uint64        // guarded by wmu and mu (written under both)

	mu       sync.Mutex
	pending  map[uint64]*pendingCall
	ended    bool   // takes no new calls
	endErr   *Error // why, for a call that finds it ended
	lastUsed time.Time
	idle     *time.Timer
	grace    *time.Timer // set once retiring: cancels the stream if it lingers
}

// pendingCall is a call written on a stream, waiting for its reply.
type pendingCall struct {
	sig  string           // its line's signature, which the reply's is bound to
	done chan callOutcome // buffered: the reader never waits for the caller
	// end is where its line ends in the stream's bytes (the pipe's count;
	// 0 until known), under the stream's mu.
	end uint64
}

// callOutcome is a call's reply or failure.
type callOutcome struct {
	reply []byte
	err   *Error
}

// openStream starts a call stream to addr and waits until the server has
// answered its headers, so a peer that cannot be reached or refuses
// costs no call.
func (c *Client) openStream(addr string) (*callStream, *Error) {
	ctx, cancel := context.WithCancel(c.ctx) // Close cancels it
	pipe := newLinePipe()
	// The client's id and the stream's number make each stream's
	// signature, which its lines chain to, its own.
	uri := callsPath + "?client=" + c.id + "&stream=" + strconv.FormatUint(c.streams.Add(1), 10) +
		"&max_reply=" + strconv.FormatInt(c.cfg.MaxBodyBytes, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(addr, uri), pipe)
	if err != nil {
		cancel()
		return nil, &Error{Kind: KindBadRequest, Message: "bad peer address: " + err.Error(), cause: err}
	}
	ts := strconv.FormatInt(c.cfg.Now().UnixMilli(), 10)
	sig := c.signer.signRequest(http.MethodPost, uri, ts, "", nil)
	req.Header = http.Header{"Content-Type": {"application/jsonl"}, headerTime: {ts}, headerSignature: {sig}}

	// The request's context lives as long as the stream, so the wait for
	// the answer is bounded by a timer instead.
	timer := time.AfterFunc(c.cfg.DialTimeout+c.cfg.Health.withDefaults().Timeout, cancel)
	resp, err := c.hc.Do(req)
	fail := func(e *Error) (*callStream, *Error) {
		cancel()
		pipe.closeWrite()
		return nil, e
	}
	if !timer.Stop() && err == nil { // it fired just after the answer
		resp.Body.Close()
		return fail(&Error{Kind: KindUnavailable, Message: "no answer to the call stream's opening in time"})
	}
	if err != nil {
		e := transportError(ctx, err)
		if e.Kind == KindCanceled { // the timer, or Close
			e.Kind, e.Message = KindUnavailable, "no answer to the call stream's opening in time, or the client closed"
		}
		e.OutcomeUnknown = false // the stream carried no call yet
		return fail(e)
	}
	var body []byte
	if resp.StatusCode != http.StatusOK {
		body, _ = readAll(resp.Body, resp.ContentLength, 64<<10, "refusal")
	}
	if !equal(resp.Header.Get(headerSignature), c.signer.signReply(sig, resp.StatusCode, body)) {
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusUnauthorized: // refused before running
			return fail(decodeWireError(resp.StatusCode, body))
		case http.StatusNotFound: // a peer without call streams, or not a peer: a request will tell
			return fail(&Error{Kind: KindNotFound, Message: "the peer has no call streams", cause: errNoCallStream})
		}
		return fail(&Error{Kind: KindUnauthorized, OutcomeUnknown: true,
			Message: "HTTP " + strconv.Itoa(resp.StatusCode) + " without a valid signature: not a peer of this cluster"})
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return fail(decodeWireError(resp.StatusCode, body))
	}
	st := &callStream{c: c, addr: addr, pipe: pipe, sig: sig, cancel: cancel, enc: json.NewEncoder(pipe),
		slots: make(chan struct{}, streamMaxInFlight), done: make(chan struct{}),
		pending: map[uint64]*pendingCall{}, lastUsed: time.Now()}
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		resp.Body.Close()
		return fail(&Error{Kind: KindUnavailable, Message: "the client is closed"})
	}
	c.wg.Add(1)
	c.mu.Unlock()
	st.idle = time.AfterFunc(streamIdle, st.idleCheck)
	go st.read(resp)
	return st, nil
}

// errStreamEnded is the cause of a call that found its stream ended
// before its line was written: it did not run, and may go on a new
// stream.
var errStreamEnded = errors.New("the call stream ended")

// errNoCallStream is the cause of an opening answered 404 without a
// signature: a peer of a version without call streams (a rolling
// upgrade), to which calls go as requests of their own.
var errNoCallStream = errors.New("the peer has no call streams")

// streamIdle is how long a call stream without calls stays open (to
// twice that).
var streamIdle = 10 * time.Minute

// call writes l as the stream's next call line and waits for its reply,
// or for ctx to end (then it writes a cancel line, and the outcome is
// unknown). A failure before the line was written says so: the call did
// not run.
func (st *callStream) call(ctx context.Context, l *callLine) ([]byte, *Error) {
	select {
	case st.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, contextError(ctx, false)
	case <-st.done:
		return nil, &Error{Kind: KindUnavailable, Message: "the call stream ended", cause: errStreamEnded}
	}
	p := &pendingCall{done: make(chan callOutcome, 1)}
	if err := st.write(l, p); err != nil {
		st.mu.Lock()
		mine := l.Seq == 0 || st.pending[l.Seq] == p
		if l.Seq != 0 && mine {
			delete(st.pending, l.Seq)
		}
		st.mu.Unlock()
		if !mine { // the stream's end failed it first: it may have been written
			return st.wait(ctx, l.Seq, p)
		}
		<-st.slots
		return nil, err
	}
	return st.wait(ctx, l.Seq, p)
}

// wait waits for the reply to call seq, or cancels it when ctx ends.
func (st *callStream) wait(ctx context.Context, seq uint64, p *pendingCall) ([]byte, *Error) {
	select {
	case o := <-p.done:
		return o.reply, o.err
	case <-ctx.Done():
		// The call keeps its slot until its reply arrives, as the server
		// still counts it. A deadline the server applies by itself; a
		// cancellation it learns from a cancel line.
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			_ = st.write(&callLine{Cancel: seq}, nil)
		}
		return nil, contextError(ctx, true)
	}
}

// write assigns l its seq, signs it and writes it; p, when not nil, is
// registered for the reply first. An error means the line was not
// written.
func (st *callStream) write(l *callLine, p *pendingCall) *Error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.Lock()
	if st.ended {
		e := st.endErr
		st.mu.Unlock()
		return &Error{Kind: e.Kind, Code: e.Code, Message: e.Message, cause: errStreamEnded}
	}
	st.seq++
	l.Seq = st.seq
	l.Sig = st.c.signer.signCall(st.sig, l)
	if p != nil {
		p.sig = l.Sig
		st.pending[l.Seq] = p
	}
	st.lastUsed = time.Now()
	st.mu.Unlock()
	var err error
	var ok bool
	if st.buf, ok = appendCallLine(st.buf[:0], l); ok {
		_, err = st.pipe.Write(st.buf) // the pipe copies it
		if cap(st.buf) > callLineMax {
			st.buf = nil // a large line's buffer is not kept for the stream's life
		}
	} else {
		err = st.enc.Encode(l)
	}
	if err != nil {
		return &Error{Kind: KindUnavailable, Message: "the call stream broke: " + err.Error(), cause: err}
	}
	if p != nil {
		end, _ := st.pipe.counts() // the writes are serialized by wmu
		st.mu.Lock()
		p.end = end
		st.mu.Unlock()
	}
	st.pipe.flush()
	return nil
}

// read takes the reply lines and hands each to its call, until the
// response ends; then every call still waiting fails: surely not run when
// its line never left the pipe, else its outcome unknown.
func (st *callStream) read(resp *http.Response) {
	defer st.c.wg.Done()
	defer close(st.done)
	defer st.cancel()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4<<10), base64.StdEncoding.EncodedLen(int(st.c.cfg.MaxBodyBytes))+callLineMax)
	why := st.readLines(sc)
	resp.Body.Close()
	st.pipe.CloseWithError(errors.New("the call stream ended"))
	_, taken := st.pipe.counts() // final: a broken pipe gives nothing more
	st.mu.Lock()
	if st.grace != nil {
		st.grace.Stop()
	}
	st.idle.Stop()
	st.endLocked(&Error{Kind: KindUnavailable, Message: "the call stream ended"})
	failed := make(map[*pendingCall]*Error, len(st.pending))
	for _, p := range st.pending {
		e := &Error{Kind: why.Kind, Code: why.Code, Message: why.Message, OutcomeUnknown: true, cause: why.cause}
		if p.end > taken { // still in the pipe: it never left this process
			e = &Error{Kind: KindUnavailable, Message: "the call stream ended before the call was sent: " + why.Message, cause: errStreamEnded}
		}
		failed[p] = e
	}
	st.pending = map[uint64]*pendingCall{}
	st.mu.Unlock()
	for p, e := range failed {
		st.settle(p, callOutcome{err: e})
	}
}

// readLines reads reply lines until the response ends or fails, and
// returns why it ended.
func (st *callStream) readLines(sc *bufio.Scanner) *Error {
	for sc.Scan() {
		var l replyLine
		if err := parseLine(sc.Bytes(), &l, plainReplyLine); err != nil {
			return &Error{Kind: KindInternal, Message: "a reply line that does not decode: " + err.Error()}
		}
		if l.End {
			if !equal(l.Sig, st.c.signer.signReplyLine(st.sig, "", &l)) {
				return &Error{Kind: KindUnauthorized, Message: "an end line without a valid signature"}
			}
			st.endAt(l.Seq, decodeWireError(l.Status, l.Body))
			continue
		}
		st.mu.Lock()
		p := st.pending[l.Seq]
		delete(st.pending, l.Seq)
		st.mu.Unlock()
		if p == nil {
			continue // a call already failed (its stream end, its cancellation)
		}
		if !equal(l.Sig, st.c.signer.signReplyLine(st.sig, p.sig, &l)) {
			e := &Error{Kind: KindUnauthorized, Message: "a reply line without a valid signature: not a peer of this cluster"}
			st.settle(p, callOutcome{err: &Error{Kind: e.Kind, Message: e.Message, OutcomeUnknown: true}})
			return e
		}
		st.settle(p, replyOutcome(&l, st.c.cfg.MaxBodyBytes))
	}
	err := sc.Err()
	switch {
	case errors.Is(err, bufio.ErrTooLong):
		return tooLarge("reply", st.c.cfg.MaxBodyBytes)
	case err != nil:
		return &Error{Kind: KindUnavailable, Message: "the call stream broke: " + err.Error(), cause: err}
	}
	return &Error{Kind: KindUnavailable, Message: "the peer ended the call stream"}
}

// replyOutcome is what a verified reply line says.
func replyOutcome(l *replyLine, limit int64) callOutcome {
	switch {
	case int64(len(l.Body)) > limit:
		e := tooLarge("reply", limit)
		e.OutcomeUnknown = true
		return callOutcome{err: e}
	case l.Status != http.StatusOK:
		return callOutcome{err: decodeWireError(l.Status, l.Body)}
	}
	return callOutcome{reply: l.Body}
}

// settle hands a call its outcome and frees its slot.
func (st *callStream) settle(p *pendingCall, o callOutcome) {
	p.done <- o
	<-st.slots
	st.retireIfDone()
}

// endAt takes the server's end line: it read no line past last, so the
// calls after it surely did not run; they fail with why.
func (st *callStream) endAt(last uint64, why *Error) {
	st.mu.Lock()
	st.endLocked(why)
	var failed []*pendingCall
	for seq, p := range st.pending {
		if seq > last {
			failed = append(failed, p)
			delete(st.pending, seq)
		}
	}
	st.mu.Unlock()
	for _, p := range failed {
		st.settle(p, callOutcome{err: &Error{Kind: why.Kind, Code: why.Code, Message: why.Message}})
	}
	st.retireIfDone()
}

func (st *callStream) endLocked(why *Error) {
	if !st.ended {
		st.ended, st.endErr = true, why
	}
}

// retireIfDone closes an ended stream once no call waits on it.
func (st *callStream) retireIfDone() {
	st.mu.Lock()
	done := st.ended && len(st.pending) == 0
	st.mu.Unlock()
	if done {
		st.retire()
	}
}

// retire ends the stream: no new calls; the request body ends, so the
// server answers the calls it runs and ends the response; past
// closeGrace the stream is canceled. It does not wait.
func (st *callStream) retire() {
	st.mu.Lock()
	st.endLocked(&Error{Kind: KindUnavailable, Message: "the call stream was closed"})
	start := st.grace == nil
	if start {
		st.grace = time.AfterFunc(closeGrace, st.cancel)
	}
	st.mu.Unlock()
	if start {
		st.pipe.closeWrite() // a line is written whole or not at all
	}
}

// idleCheck retires a stream that has had no call for streamIdle.
func (st *callStream) idleCheck() {
	st.mu.Lock()
	idle := len(st.pending) == 0 && time.Since(st.lastUsed) >= streamIdle
	if !idle && !st.ended {
		st.idle.Reset(streamIdle)
	}
	st.mu.Unlock()
	if idle {
		st.retire()
		st.c.forget(st)
	}
}

// contextError is the failure of a call whose ctx ended; written says
// whether its line was.
func contextError(ctx context.Context, written bool) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: KindDeadline, Message: "no reply within the caller's deadline", OutcomeUnknown: written, cause: ctx.Err()}
	}
	return &Error{Kind: KindCanceled, Message: "the caller canceled", OutcomeUnknown: written, cause: ctx.Err()}
}

// isEnded reports whether the stream takes no new calls.
func (st *callStream) isEnded() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.ended
}
