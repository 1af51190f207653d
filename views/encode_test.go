package views

import (
	"cmp"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestEncodingKeepsOrder: byte order of encoded values is the values'
// order, for pairs of values (the value, then a second one, as a key of
// two fields), and no encoding holds 0xFF.
func TestEncodingKeepsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 0x02, 'a', 'b', 0xFD, 0xFE, 0xFF}
	str := func() string {
		b := make([]byte, rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	cases := []struct {
		name string
		gen  func() ([]byte, any)
	}{
		{"strings", func() ([]byte, any) {
			a, b := str(), str()
			return appendString(appendString(nil, a), b), [2]string{a, b}
		}},
		{"ints", func() ([]byte, any) {
			a := rng.Int64() >> rng.IntN(64)
			if rng.IntN(2) == 0 {
				a = -a
			}
			b := str()
			return appendString(appendInt(nil, a), b), struct {
				i int64
				s string
			}{a, b}
		}},
		{"floats", func() ([]byte, any) {
			a := []float64{math.Inf(-1), -1e300, -1, -0.5, 0, 0.5, 1, 1e300, math.Inf(1)}[rng.IntN(9)] * rng.Float64()
			return appendFloat(nil, a), a
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range 5000 {
				k1, v1 := tc.gen()
				k2, v2 := tc.gen()
				if strings.IndexByte(string(k1), 0xFF) >= 0 {
					t.Fatalf("%v encodes with 0xFF: %q", v1, k1)
				}
				want := compareValues(v1, v2)
				if got := strings.Compare(string(k1), string(k2)); got != want {
					t.Fatalf("%v vs %v: keys compare %d, values %d (%q, %q)", v1, v2, got, want, k1, k2)
				}
			}
		})
	}
}

func compareValues(a, b any) int {
	switch a := a.(type) {
	case [2]string:
		b := b.([2]string)
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	case float64:
		return cmp.Compare(a, b.(float64))
	default:
		x, y := a.(struct {
			i int64
			s string
		}), b.(struct {
			i int64
			s string
		})
		return cmp.Or(cmp.Compare(x.i, y.i), strings.Compare(x.s, y.s))
	}
}
