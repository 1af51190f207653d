package peer

import (
	"encoding/base64"
	"strconv"
)

// A tell stream's lines are signed in batches: the lines the sender writes
// in one go (until its queue is empty, or a batch's bounds) are one batch,
// and only its last line carries a signature, an HMAC over every line of
// the batch, chained to the signature before it:
//
//	HMAC(secret, "trellis-peer/1 tell\n" previous-signature "\n"
//	     then for each line: seq "\n" to "\n" len(msg) "\n" msg)
//
// where the previous signature is the last batch's, or for the first
// batch the stream's request signature. The server holds a batch's lines
// until its signature checks, and delivers none of them otherwise: a
// line forged, dropped, reordered or replayed within a batch changes the
// MAC; a batch moved or replayed breaks the chain and the seq count. The
// paths hold no line break and the message goes after its length, so the
// MAC's input reads one way only.

// The bounds of a batch: the sender signs a line once its batch holds
// tellBatchLines lines or tellBatchBytes bytes of messages, and the
// server refuses a stream that goes past them unsigned, so that what it
// holds unchecked is bounded.
const (
	tellBatchLines = 128
	tellBatchBytes = 64 << 10
)

// tellMAC signs (the sender) or checks (the server) one stream's batches.
type tellMAC struct {
	s     *signer
	m     *macState // m.h holds the open batch
	prev  []byte    // the last batch's signature, base64url
	lines int       // in the open batch
	bytes int       // of messages in the open batch
	hdr   []byte    // scratch for a line's fields
}

// newTellMAC starts the chain of a stream whose request signature is
// streamSig; release gives its state back.
func (s *signer) newTellMAC(streamSig string) *tellMAC {
	return &tellMAC{s: s, m: s.pool.Get().(*macState), prev: []byte(streamSig)}
}

// add puts a line into the open batch, opening one if none is.
func (t *tellMAC) add(seq uint64, to string, msg []byte) {
	if t.lines == 0 {
		t.m.h.Reset()
		t.hdr = append(t.hdr[:0], "trellis-peer/1 tell\n"...)
		t.hdr = append(append(t.hdr, t.prev...), '\n')
		t.m.h.Write(t.hdr)
	}
	t.hdr = append(strconv.AppendUint(t.hdr[:0], seq, 10), '\n')
	t.hdr = append(append(t.hdr, to...), '\n')
	t.hdr = append(strconv.AppendInt(t.hdr, int64(len(msg)), 10), '\n')
	t.m.h.Write(t.hdr)
	t.m.h.Write(msg)
	t.lines++
	t.bytes += len(msg)
}

// full reports whether the open batch has reached its bounds: the sender
// signs the line it just added; the server refuses a further line.
func (t *tellMAC) full() bool {
	return t.lines >= tellBatchLines || t.bytes >= tellBatchBytes
}

// open is the number of lines in the open batch.
func (t *tellMAC) open() int { return t.lines }

// appendSum closes the open batch: it appends the batch's signature
// (base64url) to dst, and chains the next batch to it.
func (t *tellMAC) appendSum(dst []byte) []byte {
	t.m.buf = t.m.h.Sum(t.m.buf[:0])
	start := len(dst)
	dst = base64.RawURLEncoding.AppendEncode(dst, t.m.buf)
	t.prev = append(t.prev[:0], dst[start:]...)
	t.lines, t.bytes = 0, 0
	return dst
}

// release gives the MAC's state back; t is not used after.
func (t *tellMAC) release() {
	t.s.pool.Put(t.m)
	t.m = nil
}
