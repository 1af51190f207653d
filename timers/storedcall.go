package timers

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/huff0"

	"github.com/trellis-go/trellis/components"
)

// The stored form of a call in Redis: its JSON, or — when that is longer
// than compressAbove bytes and Huffman coding makes the call shorter —
// huffTag, the length of the call's binary form as a uvarint, and that
// binary form Huffman-coded (huff0, four streams) with a table of its own
// written before the streams, or, starting with sharedHuffTag, with the
// table every call may share (sharedtable.go). The binary form is
// componentId, method and entityId, each a uvarint length and its bytes,
// then the argument's JSON. (deflateTag and the DEFLATE of the JSON, the
// legacy form, decode too.)
//
// Why compress: jemalloc rounds a 1 KB argument's allocation up to its
// 1,280-byte size class, and with the sorted-set and hash entries on top
// an uncompressed 1 KB timer costs ~1,460 bytes of Redis memory, over the
// 1,400 target. JSON compresses well (even random base64 text loses a
// fifth), which brings a 1 KB call under 1,024 bytes and its timer to
// ~1,100. Entropy coding alone (no LZ77 matching) gets any JSON text
// short of escapes under that size class, at a fraction of LZ77's cost.
// Why huff0 rather than Huffman-only DEFLATE: a call is decoded each time
// it fires, and huff0's table-driven four-stream decoder takes a third of
// the time compress/flate does for a 1 KB call (2 µs against 7 µs), which
// in a burst of timers is a tenth of all the scheduler's work. Why the
// binary form: the argument's JSON is scanned by the method's decoder when
// the call runs; decoding the call's JSON first would scan it once more.
// Small calls stay plain JSON, readable with redis-cli.
const (
	compressAbove = 256
	deflateTag    = '\x00' // JSON never starts with NUL
	huffTag       = '\x01'
)

var (
	// huffScratch holds huff0's tables between uses; a Scratch serves one
	// goroutine at a time.
	huffScratch = sync.Pool{New: func() any { return new(huff0.Scratch) }}

	// packedIn holds a stored call's compressed bytes while huff0 reads
	// them (it takes a []byte, not the string Redis gave), so that each
	// call does not copy them into a fresh buffer for the collector.
	packedIn = sync.Pool{New: func() any { return new([]byte) }}

	inflaters = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
	// inflated holds a call's JSON while it is decoded (DeferredCall
	// copies what it keeps), so that a claim of 1 KB calls does not grow a
	// fresh buffer for each.
	inflated = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// encodeCall returns call's stored form.
func encodeCall(call components.DeferredCall) ([]byte, error) {
	j, err := call.Marshal()
	if err != nil || len(j) <= compressAbove {
		return j, err
	}
	var bin []byte
	for _, f := range []string{call.ComponentID, call.Method, call.EntityID} {
		bin = binary.AppendUvarint(bin, uint64(len(f)))
		bin = append(bin, f...)
	}
	bin = append(bin, call.Argument...)
	out, ok := huffPack(bin)
	if shared, sok := sharedPack(bin); sok && (!ok || len(shared) <= len(out)+len(out)/sharedSlack) {
		out, ok = shared, true
	}
	if !ok || len(out) >= len(j) {
		return j, nil
	}
	return out, nil
}

// huffPack returns huffTag and the Huffman coding of a call's binary form
// bin; ok is false when bin does not compress (or is one byte repeated).
func huffPack(bin []byte) (out []byte, ok bool) {
	s := huffScratch.Get().(*huff0.Scratch)
	defer huffScratch.Put(s)
	// Every stored call carries its own table: a table reused from the
	// previous call would not be there when this one is decoded.
	s.Reuse = huff0.ReusePolicyNone
	packed, _, err := huff0.Compress4X(bin, s)
	if err != nil {
		return nil, false
	}
	return frame(huffTag, bin, packed), true
}

// decodeCall reads a stored form written by encodeCall, or by
// encodeStored (whose trace context it skips).
func decodeCall(stored string) (components.DeferredCall, error) {
	if stored != "" && stored[0] == traceTag {
		_, rest, err := cutTrace(stored)
		if err != nil {
			return components.DeferredCall{}, err
		}
		stored = rest
	}
	switch {
	case stored != "" && stored[0] == huffTag:
		return decodeHuffCall(stored[1:], false)
	case stored != "" && stored[0] == sharedHuffTag:
		return decodeHuffCall(stored[1:], true)
	case stored != "" && stored[0] == deflateTag:
		return decodeDeflateCall(stored[1:])
	}
	return components.UnmarshalDeferredCall([]byte(stored))
}

// decodeHuffCall reads what follows huffTag, or sharedHuffTag when shared.
func decodeHuffCall(stored string, shared bool) (components.DeferredCall, error) {
	n, k := binary.Uvarint([]byte(stored[:min(len(stored), binary.MaxVarintLen64)]))
	if k <= 0 || n > huff0.BlockSizeMax {
		return components.DeferredCall{}, errors.New("decode deferred call: corrupt length of the compressed form")
	}
	in := packedIn.Get().(*[]byte)
	defer packedIn.Put(in)
	*in = append((*in)[:0], stored[k:]...)
	packed, dec := *in, sharedDecoder
	if !shared {
		s := huffScratch.Get().(*huff0.Scratch)
		defer huffScratch.Put(s)
		var err error
		if s, packed, err = huff0.ReadTable(packed, s); err != nil {
			return components.DeferredCall{}, fmt.Errorf("decode deferred call: huffman table: %w", err)
		}
		dec = s.Decoder()
	}
	// The argument is a slice of bin: the call owns it.
	bin, err := dec.Decompress4X(make([]byte, 0, n), packed)
	if err != nil || uint64(len(bin)) != n {
		return components.DeferredCall{}, fmt.Errorf("decode deferred call: huffman streams (%d of %d bytes): %v", len(bin), n, err)
	}
	return decodeBinaryCall(bin)
}

// decodeDeflateCall reads what follows deflateTag: the DEFLATE of the
// call's JSON.
func decodeDeflateCall(stored string) (components.DeferredCall, error) {
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	if err := r.(flate.Resetter).Reset(strings.NewReader(stored), nil); err != nil {
		return components.DeferredCall{}, err
	}
	buf := inflated.Get().(*bytes.Buffer)
	defer inflated.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return components.DeferredCall{}, fmt.Errorf("inflate: %w", err)
	}
	return components.UnmarshalDeferredCall(buf.Bytes())
}

// decodeBinaryCall reads a call's binary form; the call's argument is the
// end of b. The argument was checked when the timer was created; the
// method's decoder reads it when it runs.
func decodeBinaryCall(b []byte) (components.DeferredCall, error) {
	var f [3]string
	for i := range f {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return components.DeferredCall{}, errors.New("decode deferred call: truncated binary form")
		}
		f[i], b = string(b[k:k+int(n)]), b[k+int(n):]
	}
	call := components.DeferredCall{ComponentID: f[0], Method: f[1], EntityID: f[2], Argument: b}
	return call, call.CheckNames()
}
