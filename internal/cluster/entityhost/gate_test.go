package entityhost

import (
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
)

// closedWithin reports whether ch is closed within limit.
func closedWithin(ch <-chan struct{}, limit time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(limit):
		return false
	}
}

// TestGateWakesWaiters: a waiter that took the gate's next change is woken
// when a shard's last command in flight is done and when a shard is
// drained, not by a command that leaves others in flight, and not again
// without a change.
func TestGateWakesWaiters(t *testing.T) {
	fence := cluster.Fence{Shard: 3, Incarnation: "i", Epoch: 1}
	g := &gate{serving: func(shard int) (cluster.Fence, bool) { return fence, shard == 3 }}
	first, ok := g.admit(3)
	second, ok2 := g.admit(3)
	if !ok || !ok2 {
		t.Fatal("a served shard does not admit")
	}
	tests := []struct {
		name  string
		event func()
		wakes bool
	}{
		{name: "a command done, another in flight", event: first, wakes: false},
		{name: "the same done again", event: first, wakes: false},
		{name: "the last command done", event: second, wakes: true},
		{name: "nothing happens", event: func() {}, wakes: false},
		{name: "the shard drained", event: func() { g.drain(3) }, wakes: true},
	}
	for _, tt := range tests {
		wake := g.changes.next()
		tt.event()
		limit := time.Second
		if !tt.wakes {
			limit = 50 * time.Millisecond
		}
		if got := closedWithin(wake, limit); got != tt.wakes {
			t.Errorf("%s: woken %v, want %v", tt.name, got, tt.wakes)
		}
	}
	if !g.draining(3) || g.busy(3) != 0 {
		t.Errorf("draining %v with %d in flight, want draining with none", g.draining(3), g.busy(3))
	}
}
