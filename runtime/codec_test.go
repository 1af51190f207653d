package runtime_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/trellis-go/trellis/runtime"
)

type codecMsg struct {
	Name string            `json:"name"`
	N    int               `json:"n"`
	Tags map[string]string `json:"tags,omitempty"`
	Raw  []byte            `json:"raw"`
}

// failing cannot be encoded.
type failing struct{}

func (failing) MarshalJSON() ([]byte, error) { return nil, errors.New("no") }

// TestJSONAppendEncode: AppendEncode writes after dst exactly what
// json.Marshal returns, and DecodeInto reads what Decode does, for
// JSONCodec and for a codec with neither method.
func TestJSONAppendEncode(t *testing.T) {
	prefix := []byte("head:")
	for _, msg := range []codecMsg{
		{},
		{Name: `<a href="x">&amp;</a>`, N: -7, Raw: []byte{0, 1, 255}},
		{Name: "ünï\u2028code", N: 1 << 40, Tags: map[string]string{"b": "2", "a": "1"}},
		{Name: string(bytes.Repeat([]byte("long "), 2000))},
	} {
		want, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []runtime.Codec[codecMsg]{runtime.JSONCodec[codecMsg]{}, encodeOnly[codecMsg]{}} {
			got, err := runtime.AppendEncode(c, bytes.Clone(prefix), msg)
			if err != nil || !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
				t.Fatalf("%T: AppendEncode wrote %.80q (%v), want %.80q after the prefix", c, got, err, want)
			}
			var back codecMsg
			if err := runtime.DecodeInto(c, want, &back); err != nil || !reflect.DeepEqual(back, roundTrip(t, want)) {
				t.Fatalf("%T: DecodeInto read %+v (%v)", c, back, err)
			}
		}
	}
	got, err := runtime.AppendEncode(runtime.JSONCodec[failing]{}, prefix, failing{})
	if err == nil || !bytes.Equal(got, prefix) {
		t.Fatalf("a failing encode: %q, %v", got, err)
	}
	var n int
	if err := runtime.DecodeInto(runtime.JSONCodec[int]{}, []byte(`"x"`), &n); err == nil {
		t.Fatal("DecodeInto took a string for an int")
	}
	if err := runtime.DecodeInto(runtime.JSONCodec[int]{}, []byte(strconv.Itoa(42)), &n); err != nil || n != 42 {
		t.Fatalf("DecodeInto: %d, %v", n, err)
	}
}

// roundTrip is what Decode makes of data.
func roundTrip(t *testing.T, data []byte) codecMsg {
	m, err := runtime.JSONCodec[codecMsg]{}.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// encodeOnly is a codec with only Encode and Decode.
type encodeOnly[T any] struct{}

func (encodeOnly[T]) Encode(msg T) ([]byte, error)  { return runtime.JSONCodec[T]{}.Encode(msg) }
func (encodeOnly[T]) Decode(data []byte) (T, error) { return runtime.JSONCodec[T]{}.Decode(data) }
