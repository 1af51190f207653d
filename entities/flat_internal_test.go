package entities

import (
	"reflect"
	"testing"
	"time"
)

// IsFlat tells the state types that a plain assignment copies whole (the
// entity then hands commands a copy without decoding) from those that
// share something (it decodes afresh for each command).
func TestIsFlat(t *testing.T) {
	type counter struct {
		ID    string
		Value int
	}
	type nested struct {
		C     counter
		Pairs [2]counter
	}
	tests := []struct {
		name string       // the case
		typ  reflect.Type // the state type
		want bool         // flat
	}{
		{"int", reflect.TypeFor[int](), true},
		{"string", reflect.TypeFor[string](), true},
		{"struct of scalars", reflect.TypeFor[counter](), true},
		{"structs and arrays of them", reflect.TypeFor[nested](), true},
		{"slice", reflect.TypeFor[[]int](), false},
		{"map", reflect.TypeFor[map[string]int](), false},
		{"pointer", reflect.TypeFor[*counter](), false},
		{"interface field", reflect.TypeFor[struct{ V any }](), false},
		{"slice in an array", reflect.TypeFor[[1][]int](), false},
		{"map deep in a struct", reflect.TypeFor[struct{ N struct{ M map[string]int } }](), false},
		{"time.Time (its location is a pointer)", reflect.TypeFor[time.Time](), false},
	}
	for _, tc := range tests {
		if got := IsFlat(tc.typ); got != tc.want {
			t.Errorf("%s: IsFlat = %v, want %v", tc.name, got, tc.want)
		}
	}
}
