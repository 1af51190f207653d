package peer

import (
	"encoding/json"
	"fmt"
	"io"
)

// readAll reads r to its end into a buffer sized from hint (a
// Content-Length, -1 when unknown), failing with KindTooLarge past limit
// bytes. what names the body in that error ("argument", "reply").
// (io.ReadAll and bytes.Buffer would not take the hint: both grow by
// at least 512 bytes before they see the end.)
func readAll(r io.Reader, hint, limit int64, what string) ([]byte, error) {
	if hint > limit {
		return nil, tooLarge(what, limit)
	}
	if hint < 0 {
		hint = 512
	}
	// A Content-Length is read before the signature is checked: it sizes
	// the buffer only up to 64 KiB, beyond which the body has to arrive.
	hint = min(hint, 64<<10)
	r = io.LimitReader(r, limit+1)
	b := make([]byte, 0, hint+1) // +1: room to see the end without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the %s: %w", what, err)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(what, limit)
	}
	return b, nil
}

// tooLarge is the error of a body over its limit.
func tooLarge(what string, limit int64) *Error {
	return NewError(KindTooLarge, "", "the %s exceeds the limit of %d bytes (MaxBodyBytes)", what, limit)
}

// mustJSON encodes a value that always encodes (the wire's own structs).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("peer: encode %T: %v", v, err))
	}
	return b
}
