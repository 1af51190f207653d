package redisqueue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/wirebytes"
)

// A stored message is one binary record:
//
//	version byte (1), flags byte (ack, chunk, first, last, trace),
//	uvarint seqNr, varint timestamp (unix ms),
//	uvarint len + qualifier, [trace: uvarint len + trace context],
//	[chunk: uvarint len + manifest], payload
//
// A message stored untraced has no byte of a trace context, as before
// tracing existed.
//
// The payload is the chunk's bytes, or the message encoded by the codec.
// A chunk is a member of its qualifier's sorted set on its own; the whole
// messages of one qualifier that one batch stores are one member, a group:
//
//	version byte (2), then for each message: uvarint len + record
//
// scored by its last sequence number, so that storing a batch writes one
// member per qualifier, and a confirmation removes whole groups (the
// records of a group confirmed in part are left out when the state is
// loaded). The sequence numbers in the records keep members distinct.

const (
	recordVersion = 1
	groupVersion  = 2
)

const (
	flagAck = 1 << iota
	flagChunk
	flagFirst
	flagLast
	flagTrace
)

var errRecord = errors.New("malformed record")

// errTruncated is a record that ends before its fields do.
var errTruncated = fmt.Errorf("%w: truncated", errRecord)

// appendRecord appends m's record to b.
func appendRecord[A any](b []byte, codec durable.Codec[A], m durable.MessageSent[A]) ([]byte, error) {
	var flags byte
	var payload []byte
	if m.Ack {
		flags |= flagAck
	}
	if m.Trace != "" {
		flags |= flagTrace
	}
	if c := m.Chunk; c != nil {
		flags |= flagChunk
		if c.First {
			flags |= flagFirst
		}
		if c.Last {
			flags |= flagLast
		}
		payload = c.Data
	} else {
		var err error
		if payload, err = codec.Encode(m.Message); err != nil {
			return nil, fmt.Errorf("encode with codec %q: %w", codec.Manifest(), err)
		}
	}
	b = append(b, recordVersion, flags)
	b = binary.AppendUvarint(b, uint64(m.SeqNr))
	b = binary.AppendVarint(b, m.Timestamp.UnixMilli())
	b = wirebytes.AppendString(b, m.Qualifier)
	if m.Trace != "" {
		b = wirebytes.AppendString(b, m.Trace)
	}
	if m.Chunk != nil {
		b = wirebytes.AppendString(b, m.Chunk.Manifest)
	}
	return append(b, payload...), nil
}

// appendGrouped appends m's record to group, a group member in the making
// (nil for a new one, sized for up to n records like m's); scratch is a
// buffer to reuse, returned grown.
func appendGrouped[A any](group, scratch []byte, n int, codec durable.Codec[A], m durable.MessageSent[A]) (g, s []byte, err error) {
	if scratch, err = appendRecord(scratch[:0], codec, m); err != nil {
		return nil, scratch, err
	}
	if group == nil {
		group = append(make([]byte, 0, 1+n*(len(scratch)+2)), groupVersion)
	}
	group = binary.AppendUvarint(group, uint64(len(scratch)))
	return append(group, scratch...), scratch, nil
}

// decodeMember appends to ms the messages of a member of a qualifier's
// sorted set, a record or a group.
func decodeMember[A any](ms []durable.MessageSent[A], codec durable.Codec[A], b []byte) ([]durable.MessageSent[A], error) {
	if len(b) == 0 || b[0] != groupVersion {
		m, err := decode(codec, b)
		if err != nil {
			return ms, err
		}
		return append(ms, m), nil
	}
	r := wirebytes.Reader{B: b[1:], Short: errTruncated}
	for len(r.B) > 0 {
		n := r.Uvarint()
		if r.Err != nil || n > uint64(len(r.B)) {
			return ms, fmt.Errorf("%w: group truncated", errRecord)
		}
		m, err := decode(codec, r.B[:n])
		if err != nil {
			return ms, err
		}
		ms = append(ms, m)
		r.B = r.B[n:]
	}
	return ms, nil
}

func decode[A any](codec durable.Codec[A], b []byte) (durable.MessageSent[A], error) {
	var m durable.MessageSent[A]
	if len(b) < 2 || b[0] != recordVersion {
		return m, fmt.Errorf("%w: version", errRecord)
	}
	flags := b[1]
	r := wirebytes.Reader{B: b[2:], Short: errTruncated}
	seqNr := r.Uvarint()
	ts := r.Varint()
	m.Qualifier = r.String()
	if flags&flagTrace != 0 {
		m.Trace = r.String()
	}
	var manifest string
	if flags&flagChunk != 0 {
		manifest = r.String()
	}
	if r.Err != nil {
		return m, r.Err
	}
	m.SeqNr, m.Timestamp, m.Ack = int64(seqNr), time.UnixMilli(ts), flags&flagAck != 0
	if flags&flagChunk != 0 {
		m.Chunk = &durable.Chunk{Data: r.B, First: flags&flagFirst != 0, Last: flags&flagLast != 0, Manifest: manifest}
		return m, nil
	}
	msg, err := codec.Decode(r.B)
	if err != nil {
		return m, fmt.Errorf("message %d: decode with codec %q: %w", m.SeqNr, codec.Manifest(), err)
	}
	m.Message = msg
	return m, nil
}
