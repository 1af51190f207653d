package timers

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/components"
)

// TestStoredCallRoundTrip: every call comes back from its stored form as
// it went in, small ones stay readable JSON, large ones are compressed,
// and the legacy stored form (DEFLATE of the JSON) decodes.
func TestStoredCallRoundTrip(t *testing.T) {
	large := json.RawMessage(`"` + strings.Repeat("abcdefgh", 128) + `"`)
	legacy := func(call components.DeferredCall) string {
		j, _ := call.Marshal()
		var buf bytes.Buffer
		buf.WriteByte(deflateTag)
		w, _ := flate.NewWriter(&buf, flate.HuffmanOnly)
		_, _ = w.Write(j)
		_ = w.Close()
		return buf.String()
	}
	for _, tc := range []struct {
		name string
		// call is what is stored.
		call components.DeferredCall
		// tag is the stored form's first byte: '{' for plain JSON.
		tag byte
		// stored, when set, is a stored form to decode instead of
		// encoding call.
		stored func(components.DeferredCall) string
	}{
		{name: "small call, plain JSON", call: components.DeferredCall{ComponentID: "c", Method: "m", Argument: json.RawMessage(`{"a":1}`)}, tag: '{'},
		{name: "large call, binary and compressed", call: components.DeferredCall{ComponentID: "c", Method: "m", Argument: large}, tag: huffTag},
		{name: "large call to an entity", call: components.DeferredCall{ComponentID: "orders", Method: "expire", EntityID: "o-1", Argument: large}, tag: huffTag},
		{name: "legacy compressed JSON", call: components.DeferredCall{ComponentID: "c", Method: "m", EntityID: "e", Argument: large}, tag: deflateTag, stored: legacy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stored string
			if tc.stored != nil {
				stored = tc.stored(tc.call)
			} else {
				b, err := encodeCall(tc.call)
				if err != nil {
					t.Fatal(err)
				}
				stored = string(b)
			}
			if stored[0] != tc.tag {
				t.Fatalf("stored form starts with %q, want %q", stored[0], tc.tag)
			}
			got, err := decodeCall(stored)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.call) {
				t.Fatalf("decoded %+v, want %+v", got, tc.call)
			}
		})
	}
}

// TestStoredCallCorrupt: a stored form that does not decode is an error,
// never a panic.
func TestStoredCallCorrupt(t *testing.T) {
	arg := json.RawMessage(`"` + strings.Repeat("the quick brown fox ", 20) + `"`)
	good, err := encodeCall(components.DeferredCall{ComponentID: "c", Method: "m", Argument: arg})
	if err != nil || good[0] != huffTag {
		t.Fatalf("stored form %q…, %v: want it compressed", good[:min(len(good), 8)], err)
	}
	// pack Huffman-codes a binary form as encodeCall would.
	pack := func(bin []byte) string {
		out, ok := huffPack(bin)
		if !ok {
			t.Fatalf("%q does not compress", bin)
		}
		return string(out)
	}
	// withLength is good with its length field replaced by n.
	withLength := func(n uint64) string {
		_, k := binary.Uvarint(good[1:])
		return string(binary.AppendUvarint([]byte{huffTag}, n)) + string(good[1+k:])
	}
	noComponent := append([]byte{0, 1, 'm', 0}, arg...)
	shared, ok := sharedPack(append([]byte{1, 'c', 1, 'm', 0}, strings.Repeat("QUJD", 100)...))
	if !ok {
		t.Fatal("base64 text does not code with the shared table")
	}
	sharedCut := string(shared[:len(shared)-10])
	for _, tc := range []struct {
		// name says what is wrong with stored.
		name   string
		stored string
	}{
		{"cut short", string(good[:len(good)/2])},
		{"a field longer than what is left", pack(append(binary.AppendUvarint(nil, 10_000), arg...))},
		{"no component name", pack(noComponent)},
		{"a length beyond any call", withLength(1 << 40)},
		{"a length the streams do not have", withLength(uint64(len(arg)))},
		{"only the tag", string([]byte{huffTag})},
		{"only the shared table's tag", string([]byte{sharedHuffTag})},
		{"shared-table streams cut short", sharedCut},
		{"streams of the shared table read with their own", string(huffTag) + sharedCut[1:]},
		{"not JSON", "{nope"},
		{"DEFLATE that is not", string([]byte{deflateTag, 1, 2, 3})},
	} {
		if _, err := decodeCall(tc.stored); err == nil {
			t.Errorf("%s: decoded without an error", tc.name)
		}
	}
}

// FuzzDecodeCall: no stored form makes decodeCall panic, and what it
// decodes encodes to a form that decodes to the same call.
func FuzzDecodeCall(f *testing.F) {
	for _, arg := range []string{`1`, `"` + strings.Repeat("abc", 200) + `"`, `"` + strings.Repeat("QUJDRA9z", 100) + `"`} {
		b, err := encodeCall(components.DeferredCall{ComponentID: "c", Method: "m", EntityID: "e", Argument: json.RawMessage(arg)})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, stored []byte) {
		call, err := decodeCall(string(stored))
		if err != nil || call.Validate() != nil {
			return
		}
		again, err := encodeCall(call)
		if err != nil {
			t.Fatalf("encode %+v: %v", call, err)
		}
		back, err := decodeCall(string(again))
		// No argument and null are the same call.
		if len(call.Argument) == 0 {
			call.Argument = json.RawMessage("null")
		}
		if len(back.Argument) == 0 {
			back.Argument = json.RawMessage("null")
		}
		if err != nil || !reflect.DeepEqual(back, call) {
			t.Fatalf("round trip of %+v: %+v, %v", call, back, err)
		}
	})
}
