package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/store"
)

// TestClassify pins which Redis errors mean the store is unavailable, and
// that the mark keeps the message and the chain.
func TestClassify(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		unavailable bool
	}{
		{name: "connection refused", err: fmt.Errorf("load: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), unavailable: true},
		{name: "connection dropped", err: fmt.Errorf("save: %w", io.EOF), unavailable: true},
		{name: "reply cut short", err: io.ErrUnexpectedEOF, unavailable: true},
		{name: "client closed", err: redis.ErrClosed, unavailable: true},
		{name: "pool timeout", err: redis.ErrPoolTimeout, unavailable: true},
		{name: "nil reply", err: redis.Nil},
		{name: "deadline", err: context.DeadlineExceeded},
		{name: "anything else", err: errors.New("corrupt revision")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := store.Classify(tt.err)
			if errors.Is(got, components.ErrUnavailable) != tt.unavailable {
				t.Fatalf("Classify(%v) unavailable = %v, want %v", tt.err, !tt.unavailable, tt.unavailable)
			}
			if got.Error() != tt.err.Error() || !errors.Is(got, tt.err) {
				t.Fatalf("Classify(%v) = %v: the message and the chain must stay", tt.err, got)
			}
		})
	}
	if store.Classify(nil) != nil {
		t.Fatal("Classify(nil) is not nil")
	}
}
