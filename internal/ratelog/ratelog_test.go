package ratelog

import (
	"testing"
	"time"
)

// TestLimit: max lines per window pass, the rest are counted, and the
// first line of the next window reports them.
func TestLimit(t *testing.T) {
	l := &Limit{Max: 2, Window: time.Second}
	t0 := time.Unix(1000, 0)
	for i, want := range []bool{true, true, false, false, false} {
		if ok, _ := l.Allow(t0.Add(time.Duration(i) * time.Millisecond)); ok != want {
			t.Fatalf("line %d: allowed %v, want %v", i, ok, want)
		}
	}
	if ok, leftOut := l.Allow(t0.Add(time.Second)); !ok || leftOut != 3 {
		t.Fatalf("the next window's first line: %v, %d left out; want true, 3", ok, leftOut)
	}
	if ok, leftOut := l.Allow(t0.Add(time.Second + time.Millisecond)); !ok || leftOut != 0 {
		t.Fatalf("the line after it: %v, %d", ok, leftOut)
	}
}
