package peer

import (
	"bytes"
	"encoding/base64"
	"strconv"
)

// The lines of the streams (tell lines, call lines, reply lines) are JSON
// objects, one a line, but the peers write and read them without
// encoding/json's reflection and scans: each line's appender writes,
// field by field, the very bytes an encoding/json Encoder writes for it
// (the fields in their declared order, omitempty ones left out when
// empty, []byte as standard base64 or null, a newline after), and
// declines a line with a string that the Encoder would escape; the
// writer then uses the Encoder. Each line's parser reads that form with a
// plainReader and hands any other JSON (escapes, other orders, spaces) to
// json.Unmarshal, so it reads any line encoding/json reads, as
// json.Unmarshal reads it. The wire is encoding/json's either way.

// plainJSON reports whether encoding/json writes s as it is between its
// quotes: printable ASCII without '"', '\\' and the HTML characters the
// encoder escapes by default.
func plainJSON[S string | []byte](s S) bool {
	for i := range len(s) {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendJSONBytes appends v as encoding/json writes a []byte: null when
// nil, else its standard base64 quoted.
func appendJSONBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendJSONString appends s quoted; the caller has checked it with
// plainJSON.
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendOptString appends an omitempty string field (key is its opening,
// up to the colon) unless s is empty.
func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, key...), s)
}

// plainReader reads a line in the form the appenders write, one token
// after the other. The first token that is not in that form fails it for
// good (ok false; every later read gives a zero value), so a parser reads
// all its tokens and checks once, at done, that the whole line was that
// form. What it reads, it reads as json.Unmarshal would; what it declines
// may still be JSON, for json.Unmarshal to read.
type plainReader struct {
	rest []byte
	ok   bool
}

func newPlainReader(data []byte) plainReader { return plainReader{rest: data, ok: true} }

// lit reads s, which must come next.
func (r *plainReader) lit(s string) {
	if !r.opt(s) {
		r.ok = false
	}
}

// opt reads s if it comes next, and reports whether it did.
func (r *plainReader) opt(s string) bool {
	if !r.ok || !bytes.HasPrefix(r.rest, []byte(s)) {
		return false
	}
	r.rest = r.rest[len(s):]
	return true
}

// digits reads the text of a JSON integer: an optional minus (when
// signed) and digits without a leading zero.
func (r *plainReader) digits(signed bool) []byte {
	if !r.ok {
		return nil
	}
	n := 0
	if signed && len(r.rest) > 0 && r.rest[0] == '-' {
		n++
	}
	start := n
	for n < len(r.rest) && r.rest[n] >= '0' && r.rest[n] <= '9' {
		n++
	}
	if n == start || n-start > 1 && r.rest[start] == '0' { // JSON has no leading zeros
		r.ok = false
		return nil
	}
	d := r.rest[:n]
	r.rest = r.rest[n:]
	return d
}

// uint reads a JSON integer that fits a uint64.
func (r *plainReader) uint() uint64 {
	d := r.digits(false)
	if !r.ok {
		return 0
	}
	v, err := strconv.ParseUint(string(d), 10, 64)
	r.ok = err == nil
	return v
}

// int reads a JSON integer that fits an int.
func (r *plainReader) int() int {
	d := r.digits(true)
	if !r.ok {
		return 0
	}
	v, err := strconv.ParseInt(string(d), 10, strconv.IntSize)
	r.ok = err == nil
	return int(v)
}

// str reads a quoted string of printable ASCII without escapes, and
// returns what is between the quotes (pointing into the line).
func (r *plainReader) str() []byte {
	if !r.ok || len(r.rest) == 0 || r.rest[0] != '"' {
		r.ok = false
		return nil
	}
	for i := 1; i < len(r.rest); i++ {
		switch c := r.rest[i]; {
		case c == '"':
			s := r.rest[1:i]
			r.rest = r.rest[i+1:]
			return s
		case c == '\\' || c < 0x20 || c > 0x7e: // escapes, and bytes json.Unmarshal may replace
			r.ok = false
			return nil
		}
	}
	r.ok = false
	return nil
}

// blob reads a []byte as encoding/json writes it: null (nil), or its
// standard base64 quoted, decoded into a slice of its own, right-sized
// (empty, not nil, for "").
func (r *plainReader) blob() []byte {
	if r.opt("null") {
		return nil
	}
	if !r.opt(`"`) {
		r.ok = false
		return nil
	}
	// The decoder refuses any byte outside base64's alphabet (an escape's
	// '\\' among them) but skips '\r' and '\n', which JSON refuses in a
	// string: those are looked for apart, with IndexByte, as the closing
	// quote is.
	i := bytes.IndexByte(r.rest, '"')
	if i < 0 || bytes.IndexByte(r.rest[:i], '\r') >= 0 || bytes.IndexByte(r.rest[:i], '\n') >= 0 {
		r.ok = false
		return nil
	}
	s := r.rest[:i]
	r.rest = r.rest[i+1:]
	if len(s) == 0 {
		return []byte{}
	}
	v, err := base64.StdEncoding.AppendDecode(nil, s)
	r.ok = err == nil
	return v
}

// done reports whether the whole line was read, in the appenders' form.
func (r *plainReader) done() bool { return r.ok && len(r.rest) == 0 }

// optString reads an optional string field (key is its opening, up to
// the colon): "" when absent.
func (r *plainReader) optString(key string) string {
	if !r.opt(key) {
		return ""
	}
	return string(r.str())
}
