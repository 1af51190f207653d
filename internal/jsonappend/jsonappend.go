// Package jsonappend writes JSON values by appending to a byte slice, the
// very bytes json.Marshal writes for them, for a type that encodes itself
// on a hot path without encoding/json's reflection: strings (escaped as
// encoding/json escapes them, HTML characters included), times (as
// time.Time's MarshalJSON), and raw JSON that json.Marshal would copy as
// it is.
package jsonappend

import (
	"strconv"
	"time"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// String appends s quoted, escaped as encoding/json escapes a string by
// default: '"', '\\' and control characters, '<', '>' and '&' (as
// \u003c...), U+2028 and U+2029, and each invalid UTF-8 byte as \ufffd.
func String(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Time appends t quoted as time.Time's MarshalJSON writes it (RFC 3339
// with nanoseconds); false when MarshalJSON would fail (a year outside
// [0,9999], a zone's hour past 23), and then b is returned as it was.
func Time(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off <= -24*60*60 || off >= 24*60*60 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// Uint appends u in decimal.
func Uint(b []byte, u uint64) []byte { return strconv.AppendUint(b, u, 10) }

// Int appends i in decimal.
func Int(b []byte, i int) []byte { return strconv.AppendInt(b, int64(i), 10) }

// Plain reports whether json.Marshal copies raw, a json.RawMessage that
// holds valid JSON, as it is: raw has no whitespace between its tokens to
// compact away, and nothing the encoder escapes ('<', '>', '&', U+2028
// and U+2029). Raw JSON that json.Marshal made is plain. Validity is not
// checked: the caller's raw JSON must come from encoding/json.
func Plain(raw []byte) bool {
	inString, escaped := false, false
	for i, c := range raw {
		switch {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9):
			return false
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}
