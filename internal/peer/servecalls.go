package peer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/internal/tracing"
)

// serveCalls authenticates a call stream, answers its headers at once
// (the client waits for them before it writes), then runs its calls
// concurrently, each answered by a reply line when it finishes, until the
// client ends the request body, a line fails its check, or the server
// shuts down; then it lets the calls in flight finish and answer, and
// returns. When it stops reading before the client ended the body, an end
// line says which was the last call read: the later ones did not run.
func (s *Server) serveCalls(w http.ResponseWriter, r *http.Request) {
	sig, ok := s.checkStream(w, r, "call")
	if !ok {
		return
	}
	maxReply, err := strconv.ParseInt(r.URL.Query().Get("max_reply"), 10, 64)
	if err != nil || maxReply <= 0 {
		s.fail(w, sig, NewError(KindBadRequest, "", "call stream %q: max_reply is not a positive number", r.RequestURI))
		return
	}
	stop := context.AfterFunc(s.stopping, func() { r.Body.Close() }) // ends the Scan below
	defer stop()

	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set(headerSignature, s.signer.signReply(sig, http.StatusOK, nil))
	w.WriteHeader(http.StatusOK)
	cs := &callServer{s: s, w: w, rc: http.NewResponseController(w), r: r, sig: sig, maxReply: maxReply,
		slots: make(chan struct{}, streamMaxInFlight), running: map[uint64]context.CancelFunc{}}
	_ = cs.rc.Flush() // a gone client shows as a read error next

	last, err := cs.readCalls()
	if err != nil {
		s.log.Debug("peer: call stream ended", "remote", r.RemoteAddr, "err", err)
		if s.stopping.Err() == nil { // a bad line: what runs is canceled
			cs.cancelAll()
		}
		we := classify(err)
		cs.answer(&replyLine{Seq: last, End: true, Status: kinds[kindNamed(we.Kind)].status, Body: mustJSON(we)}, "")
	}
	cs.wg.Wait()
}

// callServer is one call stream on the server.
type callServer struct {
	s        *Server
	w        http.ResponseWriter
	rc       *http.ResponseController
	r        *http.Request
	sig      string // the stream's, which the lines chain to
	maxReply int64  // the largest reply the client takes
	slots    chan struct{}
	wg       sync.WaitGroup // the calls running

	mu      sync.Mutex // guards running
	running map[uint64]context.CancelFunc

	wmu sync.Mutex // one reply line at a time
	buf []byte     // appendReplyLine's, reused under wmu
}

// readCalls reads the lines in order, checking each one's place and
// signature, and starts each call (or cancels the one a cancel line
// names). It returns the seq of the last line read and accepted, and nil
// when the client ended the body.
func (cs *callServer) readCalls() (uint64, error) {
	sc := bufio.NewScanner(cs.r.Body)
	sc.Buffer(make([]byte, 0, 4<<10), 2*callLineMax)
	var seq uint64
	for sc.Scan() {
		var l callLine
		if err := parseLine(sc.Bytes(), &l, plainCallLine); err != nil {
			return seq, NewError(KindBadRequest, "", "line %d: %v", seq+1, err)
		}
		if l.Seq != seq+1 || !equal(l.Sig, cs.s.signer.signCall(cs.sig, &l)) {
			cs.s.log.Warn("peer: call line refused", "remote", cs.r.RemoteAddr, "seq", seq+1)
			return seq, NewError(KindUnauthorized, "", "line %d: bad signature or out of place", seq+1)
		}
		seq = l.Seq
		if l.Cancel != 0 {
			cs.mu.Lock()
			cancel := cs.running[l.Cancel]
			cs.mu.Unlock()
			if cancel != nil {
				cancel()
			}
			continue
		}
		select {
		case cs.slots <- struct{}{}: // else the stream waits: the client is over its bound
		case <-cs.r.Context().Done():
			return seq, cs.r.Context().Err()
		}
		cs.start(&l)
	}
	switch err := sc.Err(); {
	case cs.s.stopping.Err() != nil:
		return seq, NewError(KindUnavailable, "", "the server is shutting down")
	case errors.Is(err, bufio.ErrTooLong):
		return seq, NewError(KindTooLarge, "", "a call line exceeds %d bytes", 2*callLineMax)
	case err != nil:
		return seq, fmt.Errorf("read the call stream: %w", err)
	}
	return seq, nil
}

// start runs the call of line l in its own goroutine, under the
// stream's context (canceled when the connection breaks), the caller's
// time left and trace; its reply line follows when it returns.
func (cs *callServer) start(l *callLine) {
	fail := func(err error) {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			cs.reply(l, Reply{}, err)
		}()
	}
	call, err := parseForwardPath(l.Path)
	if err != nil {
		fail(NewError(KindBadRequest, "", "%v", err))
		return
	}
	if int64(len(l.Arg)) > cs.s.cfg.MaxBodyBytes {
		fail(tooLarge("argument", cs.s.cfg.MaxBodyBytes))
		return
	}
	ctx := cs.r.Context()
	if sc, ok := tracing.Restore(l.Trace); ok { // the caller's trace, now that the signature vouches for it
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, cancel, err := callContext(ctx, l.Timeout, &call)
	if err != nil {
		fail(NewError(KindBadRequest, "", "timeout %q: %v", l.Timeout, err))
		return
	}
	call.Argument = l.Arg
	cs.mu.Lock()
	cs.running[l.Seq] = cancel
	cs.mu.Unlock()
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		reply, err := cs.s.run(ctx, call)
		cancel()
		cs.mu.Lock()
		delete(cs.running, l.Seq)
		cs.mu.Unlock()
		if err != nil {
			cs.s.log.Debug("peer: call failed", "call", call.String(), "err", err)
		}
		cs.reply(l, reply, err)
	}()
}

// reply answers the call of line l and frees its slot.
func (cs *callServer) reply(l *callLine, reply Reply, err error) {
	defer func() { <-cs.slots }()
	var we wireError
	switch {
	case err != nil:
		we = classify(err)
	case int64(len(reply.Value)) > cs.maxReply:
		we = classify(tooLarge("reply", cs.maxReply))
		we.OutcomeUnknown = true // it ran
	default:
		cs.answer(&replyLine{Seq: l.Seq, Status: http.StatusOK, Body: reply.Value}, l.Sig)
		return
	}
	cs.answer(&replyLine{Seq: l.Seq, Status: kinds[kindNamed(we.Kind)].status, Body: mustJSON(we)}, l.Sig)
}

// answer signs and writes a reply line (callSig is its call's signature)
// and flushes it.
func (cs *callServer) answer(l *replyLine, callSig string) {
	l.Sig = cs.s.signer.signReplyLine(cs.sig, callSig, l)
	cs.wmu.Lock()
	defer cs.wmu.Unlock()
	var ok bool
	if cs.buf, ok = appendReplyLine(cs.buf[:0], l); !ok {
		cs.buf = append(mustJSON(l), '\n')
	}
	if _, err := cs.w.Write(cs.buf); err == nil { // a caller that is gone cannot be told
		_ = cs.rc.Flush()
	}
	if cap(cs.buf) > callLineMax { // a large reply's buffer is not kept for the stream's life
		cs.buf = nil
	}
}

// cancelAll cancels the calls running.
func (cs *callServer) cancelAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, cancel := range cs.running {
		cancel()
	}
}
