package views

import (
	"encoding/hex"
	"math"
)

// An index key is the concatenation of a query's field values and the
// row's id, each encoded so that comparing two keys byte by byte compares
// their values in order, field after field (a memcmp order, which is also
// Redis's order of sorted-set members under ZRANGEBYLEX):
//
//   - a string is its bytes with 0x00 written 00 02, 0xFE written FE 01 and
//     0xFF written FE 02, ended by 00 01: the codes are ordered as the
//     bytes they stand for, above the end mark, and no code is the prefix
//     of another, so a shorter string sorts first;
//   - a number is 16 hex digits of a uint64 whose order is the number's
//     (the sign bit flipped for an integer; for a float, every bit flipped
//     when negative, else the sign bit);
//   - a bool is "0" or "1".
//
// Every encoded value is prefix-free, so a key made of a fixed number of
// values is never the prefix of another, and no encoded byte is 0xFF:
// a key followed by 0xFF is above every key that starts with it.

// appendString appends s's order-preserving encoding.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case 0x00:
			b = append(b, 0x00, 0x02)
		case 0xFE:
			b = append(b, 0xFE, 0x01)
		case 0xFF:
			b = append(b, 0xFE, 0x02)
		default:
			b = append(b, c)
		}
	}
	return append(b, 0x00, 0x01)
}

// appendUint appends u as 16 hex digits.
func appendUint(b []byte, u uint64) []byte {
	var raw [8]byte
	for i := range raw {
		raw[i] = byte(u >> (56 - 8*i))
	}
	return hex.AppendEncode(b, raw[:])
}

// appendInt appends i in the order of signed integers.
func appendInt(b []byte, i int64) []byte { return appendUint(b, uint64(i)^(1<<63)) }

// appendFloat appends f in the order of floats (-0 before +0; NaN is
// refused before this point).
func appendFloat(b []byte, f float64) []byte {
	u := math.Float64bits(f)
	if u&(1<<63) != 0 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return appendUint(b, u)
}

// appendBool appends "0" or "1".
func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

// above is the smallest string above every key that starts with prefix:
// prefix followed by 0xFF, which no encoding holds.
func above(prefix string) string { return prefix + "\xff" }
