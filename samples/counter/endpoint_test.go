package counter_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/samples/counter"
)

// TestValidID pins the counter id rule, the contract's
// ^[A-Za-z0-9_-]{1,64}$; the HTTP tests check that a bad id is a 400
// naming "id".
func TestValidID(t *testing.T) {
	tests := []struct {
		id   string // candidate id
		want bool   // whether it is valid
	}{
		{"a", true},
		{"visits-home_2", true},
		{strings.Repeat("Z", 64), true},
		{"", false},
		{strings.Repeat("Z", 65), false},
		{"has space", false},
		{"dot.ted", false},
		{"slash/ed", false},
		{"ünïcode", false},
		{"percent%20", false},
	}
	for _, tt := range tests {
		if got := counter.ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

// TestIncreaseOnce: a keyed increase happens once per key, the key kept
// with the counter in the same write; a counter keeps the last MaxApplied
// keys.
func TestIncreaseOnce(t *testing.T) {
	c := counter.Counter{ID: "c"}
	first := entities.Try(counter.Entity, counter.IncreaseOnce, "c", c, counter.Once{By: 2, Key: "k1"}, nil)
	if first.Err != nil || !first.Updated || first.State.Value != 2 || first.State.Applied != "k1" {
		t.Fatalf("first: %+v", first)
	}
	again := entities.Try(counter.Entity, counter.IncreaseOnce, "c", first.State, counter.Once{By: 2, Key: "k1"}, nil)
	if again.Err != nil || again.Updated || again.Reply != first.State {
		t.Fatalf("the same key again: %+v; want the counter as it is, unwritten", again)
	}
	state := first.State
	for i := range counter.MaxApplied {
		state = entities.Try(counter.Entity, counter.IncreaseOnce, "c", state, counter.Once{By: 1, Key: fmt.Sprint("n", i)}, nil).State
	}
	if keys := strings.Fields(state.Applied); len(keys) != counter.MaxApplied || slices.Contains(keys, "k1") || state.Value != 2+counter.MaxApplied {
		t.Fatalf("after %d more keys: %+v; want the last %d kept", counter.MaxApplied, state, counter.MaxApplied)
	}
}
