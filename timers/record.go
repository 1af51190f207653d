package timers

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trellis-go/trellis/components"
)

// decodeRecord reads a Redis record (layout in redisscripts.go).
func decodeRecord(name, rec string) (Timer, error) {
	t, stored, err := decodeRecordHeader(name, rec)
	if err != nil {
		return Timer{}, err
	}
	if t.Call, err = decodeCall(stored); err != nil {
		return Timer{}, fmt.Errorf("timer %q: stored call: %w", name, err)
	}
	return t, nil
}

// decodeRecordHeader reads a Redis record but its call, which it returns
// in its stored form.
func decodeRecordHeader(name, rec string) (t Timer, storedCall string, err error) {
	var nums [7]int64
	rest := rec
	for i := range nums {
		field, after, ok := strings.Cut(rest, ":")
		n, err := strconv.ParseInt(field, 10, 64)
		if !ok || err != nil {
			return Timer{}, "", fmt.Errorf("timer %q: corrupt record header %q", name, rec[:min(len(rec), 80)])
		}
		nums[i], rest = n, after
	}
	errLen := int(nums[6])
	if errLen < 0 || errLen > len(rest) {
		return Timer{}, "", fmt.Errorf("timer %q: corrupt record: error length %d", name, errLen)
	}
	t = Timer{
		Name: name, Generation: uint64(nums[0]), CreatedAt: time.UnixMilli(nums[1]),
		MaxRetries: int(nums[2]), DueAt: time.UnixMilli(nums[3]), Attempts: int(nums[4]),
		LastError: rest[:errLen],
	}
	if nums[5] != 0 {
		t.LastAttemptAt = time.UnixMilli(nums[5])
	}
	return t, rest[errLen:], nil
}

// The stored form of a call in Redis: its JSON, or — when that is longer
// than compressAbove bytes and DEFLATE makes it shorter — deflateTag and
// the DEFLATE of the JSON.
//
// Why compress: jemalloc rounds a 1 KB argument's allocation up to its
// 1,280-byte size class, and with the sorted-set and hash entries on top
// an uncompressed 1 KB timer costs ~1,460 bytes of Redis memory, over the
// 1,400 target. JSON compresses well (even random base64 text loses a
// fifth), which brings a 1 KB call under 1,024 bytes and its timer to
// ~1,200. Huffman-only DEFLATE (no LZ77 matching): entropy coding alone
// gets any JSON text short of escapes under that size class, at a
// fraction of LZ77's cost on the create path. Small calls stay plain
// JSON, readable with redis-cli.
const (
	compressAbove = 256
	deflateTag    = '\x00' // JSON never starts with NUL
)

var (
	deflaters = sync.Pool{New: func() any {
		w, _ := flate.NewWriter(io.Discard, flate.HuffmanOnly)
		return w
	}}
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
	var buf bytes.Buffer
	buf.Grow(len(j))
	buf.WriteByte(deflateTag)
	w := deflaters.Get().(*flate.Writer)
	defer deflaters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(j); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if buf.Len() >= len(j) {
		return j, nil
	}
	return buf.Bytes(), nil
}

// decodeCall reads a stored form written by encodeCall.
func decodeCall(stored string) (components.DeferredCall, error) {
	if stored == "" || stored[0] != deflateTag {
		return components.UnmarshalDeferredCall([]byte(stored))
	}
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	if err := r.(flate.Resetter).Reset(strings.NewReader(stored[1:]), nil); err != nil {
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
