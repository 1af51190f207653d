// Package wirebytes reads and writes the compact binary forms of reliable
// delivery: unsigned and signed varints, and strings after their length.
// The durable Redis queue stores its records in it, and the protocol's
// messages travel between instances in it.
package wirebytes

import "encoding/binary"

// AppendString appends s after its length.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// AppendUvarints appends each of vs.
func AppendUvarints(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// Reader takes fields from B. The first that does not fit sets Err to
// Short (and empties B); every read after it gives a zero value.
type Reader struct {
	B     []byte
	Err   error
	Short error // what a cut-short input is
}

// Fail marks the input as cut short.
func (r *Reader) Fail() {
	if r.Err == nil {
		r.Err = r.Short
	}
	r.B = nil
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.B) == 0 {
		r.Fail()
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Bytes reads a byte string after its length, as String does, without
// copying it: the result is part of B.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.Err != nil || n > uint64(len(r.B)) {
		r.Fail()
		return nil
	}
	b := r.B[:n:n]
	r.B = r.B[n:]
	return b
}

// String reads a string after its length.
func (r *Reader) String() string {
	n := r.Uvarint()
	if r.Err != nil || n > uint64(len(r.B)) {
		r.Fail()
		return ""
	}
	s := string(r.B[:n])
	r.B = r.B[n:]
	return s
}

// Rest takes what is left.
func (r *Reader) Rest() []byte {
	b := r.B
	r.B = nil
	return b
}
