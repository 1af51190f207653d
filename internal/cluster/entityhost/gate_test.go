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
// when a shard is drained and when the last command in flight of a shard
// being handed over is done; not by a command that leaves others in
// flight, not by the last one of a shard nobody hands over, and not
// again without a change.
func TestGateWakesWaiters(t *testing.T) {
	fence := func(shard int) cluster.Fence { return cluster.Fence{Shard: shard, Incarnation: "i", Epoch: 1} }
	g := &gate{serving: func(shard int) (cluster.Fence, bool) { return fence(shard), shard == 3 || shard == 4 }}
	first, ok := g.admit(3)
	second, ok2 := g.admit(3)
	other, ok3 := g.admit(4)
	if !ok || !ok2 || !ok3 {
		t.Fatal("a served shard does not admit")
	}
	tests := []struct {
		name  string
		event func()
		wakes bool
	}{
		{name: "the last command of a shard kept done", event: other, wakes: false},
		{name: "the shard drained", event: func() { g.drain(3) }, wakes: true},
		{name: "a command done, another in flight", event: first, wakes: false},
		{name: "the same done again", event: first, wakes: false},
		{name: "the last command done", event: second, wakes: true},
		{name: "nothing happens", event: func() {}, wakes: false},
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
