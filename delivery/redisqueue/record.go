package redisqueue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/delivery/durable"
)

// A stored message is one binary record, the member of its qualifier's
// sorted set (the sequence number in it keeps members distinct):
//
//	version byte (1), flags byte (ack, chunk, first, last),
//	uvarint seqNr, varint timestamp (unix ms),
//	uvarint len + qualifier, [chunk: uvarint len + manifest], payload
//
// The payload is the chunk's bytes, or the message encoded by the codec.

const recordVersion = 1

const (
	flagAck = 1 << iota
	flagChunk
	flagFirst
	flagLast
)

var errRecord = errors.New("malformed record")

func encode[A any](codec durable.Codec[A], m durable.MessageSent[A]) ([]byte, error) {
	var flags byte
	var payload []byte
	if m.Ack {
		flags |= flagAck
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
	b := make([]byte, 0, 2+3*binary.MaxVarintLen64+len(m.Qualifier)+len(payload)+16)
	b = append(b, recordVersion, flags)
	b = binary.AppendUvarint(b, uint64(m.SeqNr))
	b = binary.AppendVarint(b, m.Timestamp.UnixMilli())
	b = appendString(b, m.Qualifier)
	if m.Chunk != nil {
		b = appendString(b, m.Chunk.Manifest)
	}
	return append(b, payload...), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func decode[A any](codec durable.Codec[A], b []byte) (durable.MessageSent[A], error) {
	var m durable.MessageSent[A]
	if len(b) < 2 || b[0] != recordVersion {
		return m, fmt.Errorf("%w: version", errRecord)
	}
	flags := b[1]
	r := reader{b: b[2:]}
	seqNr := r.uvarint()
	ts := r.varint()
	m.Qualifier = r.string()
	var manifest string
	if flags&flagChunk != 0 {
		manifest = r.string()
	}
	if r.err != nil {
		return m, r.err
	}
	m.SeqNr, m.Timestamp, m.Ack = int64(seqNr), time.UnixMilli(ts), flags&flagAck != 0
	if flags&flagChunk != 0 {
		m.Chunk = &durable.Chunk{Data: r.b, First: flags&flagFirst != 0, Last: flags&flagLast != 0, Manifest: manifest}
		return m, nil
	}
	msg, err := codec.Decode(r.b)
	if err != nil {
		return m, fmt.Errorf("message %d: decode with codec %q: %w", m.SeqNr, codec.Manifest(), err)
	}
	m.Message = msg
	return m, nil
}

// reader takes varints and strings from b; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated", errRecord)
	}
	r.b = nil
}
