package peer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// A tell line is JSON (see tellLine), but the sender writes and the
// server reads the form the sender writes, byte for byte what
// encoding/json makes of it, without reflection: appendTellLine writes it
// when no field needs escaping, and parseTellLine reads it, handing any
// other JSON to encoding/json. The wire is the same either way; this only
// spares the encoder's and the decoder's scans on the hot path.

// Field openings of a line in the order encoding/json writes them.
const (
	lineSeq = `{"seq":`
	lineTo  = `,"to":"`
	lineMsg = `","msg":`
	lineSig = `,"sig":"`
	lineEnd = `"}`
)

// appendTellLine appends a line's JSON and a newline, as an
// encoding/json Encoder writes them (see tellLine), to b; sig is the
// line's signature, base64url, or empty for a line within a batch (which
// then has no "sig" field). False (b unchanged) when to holds a byte
// that encoder escapes.
func appendTellLine(b []byte, seq uint64, to string, msg, sig []byte) ([]byte, bool) {
	if !plainJSON(to) {
		return b, false
	}
	b = append(b, lineSeq...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, lineTo...)
	b = append(b, to...)
	b = append(b, lineMsg...)
	if msg == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, msg)
		b = append(b, '"')
	}
	if len(sig) == 0 {
		return append(b, "}\n"...), true
	}
	b = append(b, lineSig...)
	b = append(b, sig...)
	b = append(b, lineEnd...)
	return append(b, '\n'), true
}

// plainJSON reports whether encoding/json writes s as it is between its
// quotes: printable ASCII without '"', '\\' and the HTML characters the
// encoder escapes by default.
func plainJSON(s string) bool {
	for i := range len(s) {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// parseTellLine reads a line into line: the sender's form directly, any
// other JSON with encoding/json. It returns the line's signature, which
// may point into data (line.Sig is then empty), or is empty for a line
// within a batch. A path equal to prevTo comes back as prevTo itself, so
// a stream to one actor makes no string per line.
func parseTellLine(data []byte, line *tellLine, prevTo string) (sig []byte, err error) {
	if sig, ok := parsePlainLine(data, line, prevTo); ok {
		return sig, nil
	}
	*line = tellLine{}
	if err := json.Unmarshal(data, line); err != nil {
		return nil, err
	}
	return []byte(line.Sig), nil
}

// parsePlainLine reads the form appendTellLine writes; false when data is
// in any other form (then line holds nothing meaningful).
func parsePlainLine(data []byte, line *tellLine, prevTo string) (sig []byte, ok bool) {
	rest, ok := bytes.CutPrefix(data, []byte(lineSeq))
	if !ok {
		return nil, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n > 1 && rest[0] == '0' { // JSON has no leading zeros
		return nil, false
	}
	seq, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	if err != nil {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest[n:], []byte(lineTo)); !ok {
		return nil, false
	}
	to, rest, ok := plainString(rest)
	if !ok {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(lineMsg)); !ok {
		return nil, false
	}
	var msg []byte
	if after, isNull := bytes.CutPrefix(rest, []byte("null")); isNull {
		rest = after
	} else {
		if rest, ok = bytes.CutPrefix(rest, []byte(`"`)); !ok {
			return nil, false
		}
		i := bytes.IndexByte(rest, '"')
		if i < 0 {
			return nil, false
		}
		msg = make([]byte, base64.StdEncoding.DecodedLen(i))
		m, err := base64.StdEncoding.Decode(msg, rest[:i])
		if err != nil {
			return nil, false
		}
		msg, rest = msg[:m], rest[i+1:]
	}
	if string(rest) != "}" { // else a line within a batch: no signature
		if rest, ok = bytes.CutPrefix(rest, []byte(lineSig)); !ok {
			return nil, false
		}
		sig, rest, ok = plainString(rest)
		if !ok || string(rest) != lineEnd {
			return nil, false
		}
	}
	*line = tellLine{Seq: seq, To: prevTo, Msg: msg}
	if string(to) != prevTo {
		line.To = string(to)
	}
	return sig, true
}

// plainString reads a JSON string's content up to its closing quote, which
// it leaves in rest; false if it holds an escape or a control byte.
func plainString(b []byte) (s, rest []byte, ok bool) {
	for i, c := range b {
		switch {
		case c == '"':
			return b[:i], b[i:], true
		case c == '\\' || c < 0x20:
			return nil, nil, false
		}
	}
	return nil, nil, false
}
