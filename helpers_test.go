package trellis_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-go/trellis/trellistest"
)

// The application these tests run, the stores and the admin token are
// those of package fixture, shared with the tests of internal/admin,
// internal/httpserver and internal/console.

// sharedPrefix is a Redis key prefix for services that share state; its
// keys are removed when the test ends.
func sharedPrefix(t testing.TB) string {
	t.Helper()
	prefix := "trellis-test-shared-" + rand.Text()
	rdb := trellistest.Redis(t) // closed at cleanup, after the deletion below
	t.Cleanup(func() {
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, prefix+":*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("remove the keys under %s: %v", prefix, err)
		}
	})
	return prefix
}

// refused reports whether a new TCP connection to addr is refused.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %q: %w", b, err)
	}
	return nil
}
