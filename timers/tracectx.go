package timers

import (
	"encoding/binary"
	"errors"

	"github.com/trellis-go/trellis/internal/tracing"
)

// traceTag starts the stored form of a call that keeps the W3C trace
// context its timer was created in: traceTag, the context's length as a
// uvarint, the context (tracing.Capture's form), then the call's own
// stored form (encodeCall). It sits after a recurring timer's recurrence
// header (recurTag), which the Redis scripts read and swap at the start
// of the record, so that every run of a recurring timer keeps it. A call
// created with no trace is stored as before, and records stored before
// this form existed still decode. The context counts in what the timer
// takes in the store, not in the call's MaxPayload.
const traceTag = '\x03'

// withTrace is the call's stored form c with the trace context traceCtx
// in front ("" or one longer than tracing.MaxContextLen: c as it is).
func withTrace(c []byte, traceCtx string) []byte {
	if traceCtx == "" || len(traceCtx) > tracing.MaxContextLen || c == nil {
		return c
	}
	out := make([]byte, 0, 1+binary.MaxVarintLen16+len(traceCtx)+len(c))
	out = append(out, traceTag)
	out = binary.AppendUvarint(out, uint64(len(traceCtx)))
	out = append(out, traceCtx...)
	return append(out, c...)
}

// cutTrace splits a call's stored form into its trace context and the
// call's own stored form; a form without traceTag has no context.
func cutTrace(stored string) (traceCtx, rest string, err error) {
	if stored == "" || stored[0] != traceTag {
		return "", stored, nil
	}
	n, k := binary.Uvarint([]byte(stored[1:min(len(stored), 1+binary.MaxVarintLen64)]))
	if k <= 0 || n > uint64(len(stored)-1-k) {
		return "", "", errors.New("decode deferred call: corrupt length of the trace context")
	}
	start := 1 + k
	return stored[start : start+int(n)], stored[start+int(n):], nil
}
