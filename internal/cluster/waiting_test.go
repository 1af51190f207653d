package cluster

import (
	"context"
	"slices"
	"testing"
)

// TestWaiting: a wait is told to the context's hook, begun and ended; a
// context without one is a no-op.
func TestWaiting(t *testing.T) {
	var events []string
	hook := WaitHook(func(shard int) func() {
		events = append(events, "begin")
		return func() { events = append(events, "end") }
	})
	tests := []struct {
		name string
		ctx  context.Context
		want []string
	}{
		{"with a hook", WithWaitHook(context.Background(), hook), []string{"begin", "end"}},
		{"without", context.Background(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events = nil
			Waiting(tt.ctx, 3)()
			if !slices.Equal(events, tt.want) {
				t.Fatalf("events %v, want %v", events, tt.want)
			}
		})
	}
}
