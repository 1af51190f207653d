package cluster

import (
	"testing"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestFence: a fenced write passes only with the record's current
// incarnation and epoch: not after a release (the epoch stays, but no one
// owns the shard), not with another epoch or incarnation, not on a record
// never written.
func TestFence(t *testing.T) {
	client := testenv.Redis(t)
	prefix := testPrefix(t, client)
	space := keyspace.Must(prefix)
	a := mustJoin(t, testConfig(client, prefix, "a"))
	b := mustJoin(t, testConfig(client, prefix, "b"))
	const s = 3
	fa1, err := a.Acquire(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name   string
		before func() error // run first, if set
		fence  Fence
		want   bool
	}{
		{"the owner at its epoch", nil, fa1, true},
		{"the owner at another epoch", nil, Fence{Shard: s, Incarnation: fa1.Incarnation, Epoch: 2}, false},
		{"another incarnation at the epoch", nil, Fence{Shard: s, Incarnation: b.Incarnation(), Epoch: 1}, false},
		{"a shard never owned", nil, Fence{Shard: s + 1, Incarnation: fa1.Incarnation, Epoch: 0}, false},
		{"the owner after its release", func() error { return a.Release(t.Context(), fa1) }, fa1, false},
		{"the old owner after b took over", func() error { _, err := b.Acquire(t.Context(), s); return err }, fa1, false},
		{"the new owner", nil, Fence{Shard: s, Incarnation: b.Incarnation(), Epoch: 2}, true},
	} {
		if step.before != nil {
			if err := step.before(); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
		}
		ok, err := write(t.Context(), client, space, step.fence, step.name)
		if err != nil || ok != step.want {
			t.Errorf("%s: write = %v, %v; want %v", step.name, ok, err, step.want)
		}
	}
}
