package runtime

import (
	"encoding/json"
	"sync"
)

// AppendEncoder is a Codec that can write a message's encoding after
// bytes already in a buffer, as a message that wraps another in a header
// of its own wants: one buffer and no copy of the encoding. A codec need
// not have it; [AppendEncode] falls back to Encode.
type AppendEncoder[T any] interface {
	// AppendEncode appends msg's encoding, the bytes Encode returns, to
	// dst.
	AppendEncode(dst []byte, msg T) ([]byte, error)
}

// DecoderInto is a Codec that can decode into a T the caller holds (a
// field of a message already allocated), sparing the T that Decode
// returns. A codec need not have it; [DecodeInto] falls back to Decode.
type DecoderInto[T any] interface {
	// DecodeInto decodes data into *msg, which is T's zero value.
	DecodeInto(data []byte, msg *T) error
}

// AppendEncode appends msg's encoding by c to dst: with c's AppendEncode
// if it has one, else its Encode.
func AppendEncode[T any](c Codec[T], dst []byte, msg T) ([]byte, error) {
	if a, ok := c.(AppendEncoder[T]); ok {
		return a.AppendEncode(dst, msg)
	}
	b, err := c.Encode(msg)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// DecodeInto decodes data by c into *msg, which must be T's zero value:
// with c's DecodeInto if it has one, else its Decode.
func DecodeInto[T any](c Codec[T], data []byte, msg *T) error {
	if d, ok := c.(DecoderInto[T]); ok {
		return d.DecodeInto(data, msg)
	}
	m, err := c.Decode(data)
	if err == nil {
		*msg = m
	}
	return err
}

// AppendEncode appends what Encode returns to dst, through a pooled
// json.Encoder (which writes what json.Marshal does, and a newline that
// is cut), so the encoding is not copied out of the encoder's buffer into
// a slice of its own first.
func (JSONCodec[T]) AppendEncode(dst []byte, msg T) ([]byte, error) {
	e := jsonAppenders.Get().(*jsonAppender)
	e.w.b = dst
	err := e.enc.Encode(msg)
	b := e.w.b
	e.w.b = nil
	jsonAppenders.Put(e)
	if err != nil {
		return dst, err
	}
	return b[:len(b)-1], nil // the Encoder's newline
}

// DecodeInto is json.Unmarshal into *msg.
func (JSONCodec[T]) DecodeInto(data []byte, msg *T) error { return json.Unmarshal(data, msg) }

// jsonAppender is a json.Encoder that appends to a slice.
type jsonAppender struct {
	w   appendWriter
	enc *json.Encoder
}

// appendWriter is an io.Writer that appends to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

var jsonAppenders = sync.Pool{New: func() any {
	e := &jsonAppender{}
	e.enc = json.NewEncoder(&e.w)
	return e
}}
