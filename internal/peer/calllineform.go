package peer

import (
	"encoding/json"
	"strconv"
)

// Call lines and reply lines are written by appendCallLine and
// appendReplyLine and read by parseLine with plainCallLine and
// plainReplyLine, in encoding/json's form without its reflection (see
// plainline.go): the wire is what an encoding/json Encoder writes for
// callLine and replyLine.

// parseLine reads a line into l (which it overwrites): the form plain
// reads directly, any other JSON with json.Unmarshal, whose result and
// error it gives either way.
func parseLine[T any](data []byte, l *T, plain func([]byte) (T, bool)) error {
	if v, ok := plain(data); ok {
		*l = v
		return nil
	}
	var zero T
	*l = zero
	return json.Unmarshal(data, l)
}

// appendCallLine appends l's JSON and a newline, byte for byte as an
// encoding/json Encoder writes them, to b. False (b unchanged) when a
// string of l holds a byte that encoder escapes (a trace with its
// tracestate after a newline, a path with '&'): the caller encodes that
// line with encoding/json.
func appendCallLine(b []byte, l *callLine) ([]byte, bool) {
	if !plainJSON(l.Path) || !plainJSON(l.Timeout) || !plainJSON(l.Trace) || !plainJSON(l.Sig) {
		return b, false
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, l.Seq, 10)
	if l.Cancel != 0 {
		b = strconv.AppendUint(append(b, `,"cancel":`...), l.Cancel, 10)
	}
	b = appendOptString(b, `,"path":`, l.Path)
	b = appendOptString(b, `,"timeout":`, l.Timeout)
	b = appendOptString(b, `,"trace":`, l.Trace)
	if len(l.Arg) > 0 {
		b = appendJSONBytes(append(b, `,"arg":`...), l.Arg)
	}
	b = appendJSONString(append(b, `,"sig":`...), l.Sig)
	return append(b, "}\n"...), true
}

// plainCallLine reads the form appendCallLine writes; false when data is
// in any other form.
func plainCallLine(data []byte) (callLine, bool) {
	r := newPlainReader(data)
	r.lit(`{"seq":`)
	v := callLine{Seq: r.uint()}
	if r.opt(`,"cancel":`) {
		v.Cancel = r.uint()
	}
	v.Path = r.optString(`,"path":`)
	v.Timeout = r.optString(`,"timeout":`)
	v.Trace = r.optString(`,"trace":`)
	if r.opt(`,"arg":`) {
		v.Arg = r.blob()
	}
	r.lit(`,"sig":`)
	v.Sig = string(r.str())
	r.lit("}")
	return v, r.done()
}

// appendReplyLine appends l's JSON and a newline, byte for byte as an
// encoding/json Encoder writes them, to b. False (b unchanged) when its
// signature holds a byte that encoder escapes (never one of ours).
func appendReplyLine(b []byte, l *replyLine) ([]byte, bool) {
	if !plainJSON(l.Sig) {
		return b, false
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, l.Seq, 10)
	if l.End {
		b = append(b, `,"end":true`...)
	}
	b = strconv.AppendInt(append(b, `,"status":`...), int64(l.Status), 10)
	b = appendJSONBytes(append(b, `,"body":`...), l.Body)
	b = appendJSONString(append(b, `,"sig":`...), l.Sig)
	return append(b, "}\n"...), true
}

// plainReplyLine reads the form appendReplyLine writes; false when data
// is in any other form.
func plainReplyLine(data []byte) (replyLine, bool) {
	r := newPlainReader(data)
	r.lit(`{"seq":`)
	v := replyLine{Seq: r.uint()}
	v.End = r.opt(`,"end":true`)
	r.lit(`,"status":`)
	v.Status = r.int()
	r.lit(`,"body":`)
	v.Body = r.blob()
	r.lit(`,"sig":`)
	v.Sig = string(r.str())
	r.lit("}")
	return v, r.done()
}
