package peer

import (
	"encoding/json"
	"strconv"
)

// A tell line (see tellLine) is written by appendTellLine and read by
// parseTellLine, in encoding/json's form without its reflection (see
// plainline.go).

// appendTellLine appends a line's JSON and a newline, as an
// encoding/json Encoder writes them (see tellLine), to b; sig is the
// line's signature, base64url, or empty for a line within a batch (which
// then has no "sig" field). False (b unchanged) when to or sig holds a
// byte that encoder escapes.
func appendTellLine(b []byte, seq uint64, to string, msg, sig []byte) ([]byte, bool) {
	if !plainJSON(to) || !plainJSON(sig) {
		return b, false
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = appendJSONString(append(b, `,"to":`...), to)
	b = appendJSONBytes(append(b, `,"msg":`...), msg)
	if len(sig) > 0 {
		b = appendJSONString(append(b, `,"sig":`...), sig)
	}
	return append(b, "}\n"...), true
}

// parseTellLine reads a line into line: the sender's form directly, any
// other JSON with encoding/json. It returns the line's signature, which
// may point into data (line.Sig is then empty), or is empty for a line
// within a batch. A path equal to prevTo comes back as prevTo itself, so
// a stream to one actor makes no string per line.
func parseTellLine(data []byte, line *tellLine, prevTo string) (sig []byte, err error) {
	if sig, ok := parsePlainTellLine(data, line, prevTo); ok {
		return sig, nil
	}
	*line = tellLine{}
	if err := json.Unmarshal(data, line); err != nil {
		return nil, err
	}
	return []byte(line.Sig), nil
}

// parsePlainTellLine reads the form appendTellLine writes; false when
// data is in any other form (then line is unchanged).
func parsePlainTellLine(data []byte, line *tellLine, prevTo string) (sig []byte, ok bool) {
	r := newPlainReader(data)
	r.lit(`{"seq":`)
	seq := r.uint()
	r.lit(`,"to":`)
	to := r.str()
	r.lit(`,"msg":`)
	msg := r.blob()
	if r.opt(`,"sig":`) { // else a line within a batch: no signature
		sig = r.str()
	}
	r.lit("}")
	if !r.done() {
		return nil, false
	}
	*line = tellLine{Seq: seq, To: prevTo, Msg: msg}
	if string(to) != prevTo {
		line.To = string(to)
	}
	return sig, true
}
