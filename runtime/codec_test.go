package runtime

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// TestJSONCodecInts: ints and int64s go to and from the same bytes, and
// fail on the same input, as with encoding/json.
func TestJSONCodecInts(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 9, 10, -10, 123456789, math.MaxInt64, math.MinInt64} {
		got, err := JSONCodec[int64]{}.Encode(v)
		want, _ := json.Marshal(v)
		if err != nil || string(got) != string(want) {
			t.Fatalf("encode %d: %q, %v; want %q", v, got, err, want)
		}
		gotInt, err := JSONCodec[int]{}.Encode(int(v))
		if err != nil || string(gotInt) != string(want) {
			t.Fatalf("encode int %d: %q, %v; want %q", v, gotInt, err, want)
		}
	}
	inputs := []string{"0", "-0", "1", "-1", "42", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "-9223372036854775809", "01", "-01", "00", "-", "", "1.0", "1e3", " 1", "1 ",
		"null", `"1"`, "+1", "1-", "0x10", strconv.Itoa(math.MaxInt32)}
	for _, in := range inputs {
		checkDecode[int](t, in)
		checkDecode[int64](t, in)
	}
}

// checkDecode compares JSONCodec[T]'s Decode of in with json.Unmarshal's.
func checkDecode[T comparable](t *testing.T, in string) {
	t.Helper()
	got, gotErr := JSONCodec[T]{}.Decode([]byte(in))
	var want T
	wantErr := json.Unmarshal([]byte(in), &want)
	if got != want || (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("decode %T %q: %v, %v; encoding/json: %v, %v", want, in, got, gotErr, want, wantErr)
	}
}
