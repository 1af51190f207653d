package counter_test

import (
	"strings"
	"testing"

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
