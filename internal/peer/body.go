package peer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// readAll reads r to its end into a buffer sized from hint (a
// Content-Length, -1 when unknown), failing with KindTooLarge past limit
// bytes. what names the body in that error ("argument", "reply").
func readAll(r io.Reader, hint, limit int64, what string) ([]byte, error) {
	if hint > limit {
		return nil, tooLarge(what, limit)
	}
	if hint < 0 {
		hint = 512
	}
	buf := bytes.NewBuffer(make([]byte, 0, hint+1)) // +1: ReadFrom wants room to see EOF
	if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, fmt.Errorf("read the %s: %w", what, err)
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge(what, limit)
	}
	return buf.Bytes(), nil
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
