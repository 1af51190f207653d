package peer

import (
	"strconv"
)

// Forwards on a call stream: the lines both ways, and their signatures.
//
// A client opens one call stream per peer, POST
// /peer/v1/calls?client={id}&stream={n}&max_reply={MaxBodyBytes} (its
// request signed as any request; the client's id and the stream's number
// make the stream's signature unique),
// and writes call lines (and cancel lines) on the request body; the
// server answers reply lines, and at most one end line, on the response
// body, in the order the calls finish. Every line is one JSON object and
// a newline, read with a bufio.Scanner: no framing of our own.

// callsPath is a call stream's path; its query carries the largest reply
// the client takes.
const callsPath = "/peer/v1/calls"

// The bounds of a call stream.
const (
	// callLineMax bounds a call line. A call whose line would be longer
	// (a large argument) goes as a request of its own, so that it does
	// not hold up the calls queued behind it on the stream.
	callLineMax = 64 << 10
	// streamMaxInFlight bounds the calls of a stream that have no reply
	// yet: past it a forward waits (within its deadline) for one, and a
	// server that reads more stops reading until one finishes.
	streamMaxInFlight = 250
)

// callLine is a forwarded call (Cancel zero) or the cancellation of an
// earlier call of the stream (Cancel its Seq, the other fields empty).
// Seq is 1, 2, ... on each stream, in the order the lines are written.
type callLine struct {
	Seq     uint64 `json:"seq"`
	Cancel  uint64 `json:"cancel,omitempty"`
	Path    string `json:"path,omitempty"`    // forwardPath's: the escaped names
	Timeout string `json:"timeout,omitempty"` // the time the caller has left (Go duration)
	Trace   string `json:"trace,omitempty"`   // tracing.Capture's form of the caller's span
	Arg     []byte `json:"arg,omitempty"`
	Sig     string `json:"sig"`
}

// replyLine answers the call line of the same Seq: Status and Body as a
// per-request forward's reply (200 and the reply's JSON, or an error
// status and a wireError). With End set it is the stream's end line
// instead: the server reads no line past Seq (0: none), and Body says
// why.
type replyLine struct {
	Seq    uint64 `json:"seq"`
	End    bool   `json:"end,omitempty"`
	Status int    `json:"status"`
	Body   []byte `json:"body"`
	Sig    string `json:"sig"`
}

// signCall is a call line's signature: HMAC(secret, "trellis-peer/1
// call\n" stream-signature "\n" seq "\n" cancel "\n" path "\n" timeout
// "\n" len(trace) "\n" trace arg). It chains the line to its stream and
// its place in it, so a line cannot be forged, moved or replayed unseen;
// the trace (which may hold a newline) is length-prefixed, so the
// message reads one way only.
func (s *signer) signCall(streamSig string, l *callLine) string {
	m := s.pool.Get().(*macState)
	m.buf = append(m.buf[:0], "trellis-peer/1 call\n"...)
	m.buf = append(append(m.buf, streamSig...), '\n')
	m.buf = append(strconv.AppendUint(m.buf, l.Seq, 10), '\n')
	m.buf = append(strconv.AppendUint(m.buf, l.Cancel, 10), '\n')
	m.buf = append(append(m.buf, l.Path...), '\n')
	m.buf = append(append(m.buf, l.Timeout...), '\n')
	m.buf = append(strconv.AppendInt(m.buf, int64(len(l.Trace)), 10), '\n')
	m.buf = append(m.buf, l.Trace...)
	return string(s.finish(nil, m, l.Arg))
}

// signReplyLine is a reply line's signature: signReply's over the call
// line's signature, which binds the reply to its call; an end line's is
// HMAC(secret, "trellis-peer/1 end\n" stream-signature "\n" seq "\n"
// status "\n" body).
func (s *signer) signReplyLine(streamSig, callSig string, l *replyLine) string {
	if !l.End {
		return s.signReply(callSig, l.Status, l.Body)
	}
	return s.sign(l.Body, "trellis-peer/1 end\n", streamSig, "\n", strconv.FormatUint(l.Seq, 10), "\n", strconv.Itoa(l.Status), "\n")
}

// callLineLen is about how long call's line is (a little more), to choose
// between the stream and a request of its own.
func callLineLen(path, trace string, arg []byte) int {
	return len(path) + 2*len(trace) + (len(arg)+2)/3*4 + signatureLen + 128
}
