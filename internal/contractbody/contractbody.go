// Package contractbody marks a request body that the service's contract
// check (internal/httpserver) has read whole and found valid against its
// operation's schema, so that api.Decode takes its bytes as they are and
// leaves the rules the contract states to that check.
package contractbody

import "bytes"

// Body is such a body: read it as any body, or take Bytes.
type Body struct {
	bytes.Reader
	// Bytes is the whole body, one JSON value that the contract's schema
	// accepts.
	Bytes []byte
}

// New returns the checked body b.
func New(b []byte) *Body {
	cb := &Body{Bytes: b}
	cb.Reset(b)
	return cb
}

// Close does nothing: the bytes are in memory.
func (*Body) Close() error { return nil }
