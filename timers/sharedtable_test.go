package timers

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/huff0"

	"github.com/trellis-go/trellis/components"
)

// sharedTraining is a text with the byte counts sharedTable was built
// from: every byte value once, printable ASCII 4 times, JSON's
// punctuation and space 30, base64's alphabet 100.
func sharedTraining() []byte {
	var counts [256]int
	for i := range counts {
		counts[i] = 1
	}
	for c := 0x20; c < 0x7f; c++ {
		counts[c] = 4
	}
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		counts[c] = 100
	}
	for _, c := range "\"{}:,[]=-_. " {
		counts[c] = 30
	}
	var text []byte
	for b, n := range counts {
		for range n {
			text = append(text, byte(b))
		}
	}
	return text
}

// TestSharedTableIsTheTraining: sharedTable is the table huff0 builds for
// sharedTraining. Should a later huff0 build another from the same
// counts, keep sharedTable as it is (stored calls were coded with it) and
// pin this test to it.
func TestSharedTableIsTheTraining(t *testing.T) {
	out, _, err := huff0.Compress4X(sharedTraining(), &huff0.Scratch{TableLog: 11, Reuse: huff0.ReusePolicyNone})
	if err != nil {
		t.Fatal(err)
	}
	_, streams, err := huff0.ReadTable(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out[:len(out)-len(streams)]); got != sharedTable {
		t.Fatalf("the training's table is %q, sharedTable %q", got, sharedTable)
	}
}

// TestSharedTableCodesEveryByte: a call whose argument has every byte
// value in it codes with the shared table and decodes to itself.
func TestSharedTableCodesEveryByte(t *testing.T) {
	arg := []byte(strings.Repeat("QUJD", 200))
	for b := range 256 {
		arg = append(arg, byte(b))
	}
	bin := append([]byte{1, 'c', 1, 'm', 0}, arg...)
	out, ok := sharedPack(bin)
	if !ok {
		t.Fatal("the shared table did not code a call with every byte value")
	}
	got, err := decodeCall(string(out))
	if err != nil || string(got.Argument) != string(arg) || got.ComponentID != "c" || got.Method != "m" {
		t.Fatalf("decoded %q/%q with a %d-byte argument, %v; want c/m with the %d coded", got.ComponentID, got.Method, len(got.Argument), err, len(arg))
	}
}

// TestStoredCallTable: a call whose argument is base64 text (a table of
// its own codes it no shorter) is stored with the shared table; one of
// text-like JSON, which its own table codes far shorter, with its own.
// Both decode to the call.
func TestStoredCallTable(t *testing.T) {
	raw := make([]byte, 800)
	_, _ = rand.Read(raw)
	for _, tc := range []struct {
		name string
		arg  string
		tag  byte
	}{
		{"base64", `"` + base64.StdEncoding.EncodeToString(raw) + `"`, sharedHuffTag},
		{"text", `{"note":"` + strings.Repeat("the order was placed and expires unless paid; ", 20) + `"}`, huffTag},
		{"an order's JSON", "[" + strings.Repeat(`{"orderId":"o-12345","sku":"SKU-9981","qty":3,"price":1999},`, 12) + "{}]", huffTag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := components.DeferredCall{ComponentID: "orders", Method: "expire", EntityID: "o-1", Argument: json.RawMessage(tc.arg)}
			stored, err := encodeCall(call)
			if err != nil {
				t.Fatal(err)
			}
			if stored[0] != tc.tag {
				t.Fatalf("stored with tag %d (%d bytes), want %d", stored[0], len(stored), tc.tag)
			}
			got, err := decodeCall(string(stored))
			if err != nil || !reflect.DeepEqual(got, call) {
				t.Fatalf("decoded %+v, %v", got, err)
			}
		})
	}
}

// TestStoredFormTagsDiffer: each stored form's first byte says which it
// is: no two forms share one, and none is a byte JSON can start with.
func TestStoredFormTagsDiffer(t *testing.T) {
	tags := map[byte]string{}
	for _, f := range []struct {
		name string
		tag  byte
	}{{"deflate", deflateTag}, {"huff", huffTag}, {"shared huff", sharedHuffTag}, {"recurring", recurTag}, {"traced", traceTag}} {
		if other, ok := tags[f.tag]; ok {
			t.Errorf("%s and %s share the tag %q", f.name, other, f.tag)
		}
		tags[f.tag] = f.name
		if json.Valid([]byte{f.tag}) || strings.IndexByte(" \t\r\n{[\"-0123456789tfn", f.tag) >= 0 {
			t.Errorf("%s's tag %q can start JSON", f.name, f.tag)
		}
	}
}
