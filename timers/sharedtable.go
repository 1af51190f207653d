package timers

import (
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/huff0"
)

// A call stored Huffman-coded carries its own table (huffTag), which fits
// its bytes best but must be read and built into a decoding table each
// time the call fires: most of the time decoding takes. Calls whose bytes
// spread evenly over base64's alphabet (tokens, ids, encoded blobs: what
// a table of their own cannot code much shorter) are coded instead with
// one table shared by every instance (sharedHuffTag), built once, whose
// decoder serves every call. encodeCall codes a call both ways and keeps
// the shared coding when it is at most 1/sharedSlack longer than the
// call's own: about the length for such calls, where text-like JSON,
// which its own table codes far shorter, keeps its own.

// sharedHuffTag starts a stored call coded with sharedTable: then, as
// after huffTag, the length of the call's binary form as a uvarint, and
// that form Huffman-coded in four streams, with no table.
const sharedHuffTag = '\x04'

// sharedSlack: the shared coding is kept while it is at most
// 1/sharedSlack longer than the call's own.
const sharedSlack = 16

// sharedTable is the shared code as huff0 writes a table (the Zstandard
// Huffman table format). Its weights come from sharedTraining's counts
// (sharedtable_test.go checks that they still do): every byte value has a
// code, base64's 64 symbols 6–7 bits, JSON's punctuation and space 8
// bits, other printable ASCII 10–11, every other byte 11. Calls stored
// with it decode with it for as long as they are kept, so it never
// changes; another table would need a tag of its own.
const sharedTable = "3\x10\xb0\x80v\xff\xfc\xf3\xcf?\xff\xfc\xf3\x0f\xe8\xc510000000`\x81Dj\r\x95\r\x12H \x81\x04\xd2\n/\x87\x05\x12!Zf\xef\xff\xaf\xf3\xb7\xcf7"

var (
	// sharedDecoder decodes every call coded with sharedTable; huff0's
	// Decoder is stateless, so goroutines share it.
	sharedDecoder = mustSharedScratch().Decoder()

	// sharedScratch holds huff0's encoder state set to sharedTable; a
	// Scratch serves one goroutine at a time.
	sharedScratch = sync.Pool{New: func() any { return mustSharedScratch() }}
)

// mustSharedScratch returns a Scratch that codes with sharedTable only.
func mustSharedScratch() *huff0.Scratch {
	s, rest, err := huff0.ReadTable([]byte(sharedTable), nil)
	if err != nil || len(rest) != 0 {
		panic("timers: the shared Huffman table does not read")
	}
	s.Reuse = huff0.ReusePolicyMust
	return s
}

// sharedPack returns sharedHuffTag and the coding of a call's binary form
// bin with sharedTable; ok is false when that does not make it shorter.
func sharedPack(bin []byte) (out []byte, ok bool) {
	s := sharedScratch.Get().(*huff0.Scratch)
	defer sharedScratch.Put(s)
	packed, reused, err := huff0.Compress4X(bin, s)
	if err != nil || !reused {
		return nil, false
	}
	return frame(sharedHuffTag, bin, packed), true
}

// frame returns tag, bin's length as a uvarint and packed, bin's coding.
func frame(tag byte, bin, packed []byte) []byte {
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(packed))
	out = append(out, tag)
	out = binary.AppendUvarint(out, uint64(len(bin)))
	return append(out, packed...)
}
