package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/store"
)

// TestClassifyWrite pins which failures of a write say "nothing was
// changed" (ErrUnavailable) and which "it may have been" (ErrOutcomeUnknown),
// and that the mark keeps the message and the chain.
func TestClassifyWrite(t *testing.T) {
	const (
		none = iota
		unavailable
		unknown
	)
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, unavailable},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, unavailable},
		{"write failed", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, unavailable},
		{"pool timeout", redis.ErrPoolTimeout, unavailable},
		{"client closed", redis.ErrClosed, unavailable},
		{"loading", loadingReply{}, unavailable},
		{"reply timed out", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, unknown},
		{"reset while reading", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, unknown},
		{"closed while reading", fmt.Errorf("save: %w", io.EOF), unknown},
		{"reply cut short", io.ErrUnexpectedEOF, unknown},
		{"deadline", context.DeadlineExceeded, unknown},
		{"cancelled", context.Canceled, unknown},
		{"nil reply", redis.Nil, none},
		{"anything else", errors.New("corrupt revision"), none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := store.ClassifyWrite(tt.err)
			isUnavailable, isUnknown := errors.Is(got, components.ErrUnavailable), errors.Is(got, components.ErrOutcomeUnknown)
			if isUnavailable != (tt.want == unavailable) || isUnknown != (tt.want == unknown) {
				t.Fatalf("ClassifyWrite(%v): unavailable %v, unknown %v; want kind %d", tt.err, isUnavailable, isUnknown, tt.want)
			}
			if got.Error() != tt.err.Error() || !errors.Is(got, tt.err) {
				t.Fatalf("ClassifyWrite(%v) = %v: the message and the chain must stay", tt.err, got)
			}
		})
	}
	if store.ClassifyWrite(nil) != nil {
		t.Fatal("ClassifyWrite(nil) is not nil")
	}
}

// loadingReply is Redis's LOADING reply, as go-redis returns it.
type loadingReply struct{}

func (loadingReply) Error() string { return "LOADING Redis is loading the dataset in memory" }
func (loadingReply) RedisError()   {}

// TestClassifyWriteBy: on a Redis Cluster client, which resends a command
// whose reply was lost, a write that failed is always of unknown outcome;
// on one Redis, ClassifyWrite's answer stands.
func TestClassifyWriteBy(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	one := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = one.Close(); _ = cluster.Close() })
	if err := store.ClassifyWriteBy(one, refused); !errors.Is(err, components.ErrUnavailable) || errors.Is(err, components.ErrOutcomeUnknown) {
		t.Fatalf("one Redis, dial refused: %v; want unavailable only", err)
	}
	err := store.ClassifyWriteBy(cluster, refused)
	if !errors.Is(err, components.ErrOutcomeUnknown) || errors.Is(err, components.ErrUnavailable) ||
		!errors.Is(err, refused) || err.Error() != refused.Error() {
		t.Fatalf("cluster, dial refused: %v; want unknown (not unavailable), with the message and chain", err)
	}
	if store.ClassifyWriteBy(cluster, nil) != nil || store.ClassifyWriteBy(cluster, redis.Nil) != redis.Nil {
		t.Fatal("cluster: nil and other errors must stay as they are")
	}
}
