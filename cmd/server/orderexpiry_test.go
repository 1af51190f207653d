package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
)

// TRELLIS_ORDER_EXPIRY is a positive Go duration, 10 s when unset; anything
// else is a ConfigError naming the variable.
func TestOrderExpiryFromEnv(t *testing.T) {
	tests := []struct {
		value   string        // TRELLIS_ORDER_EXPIRY
		want    time.Duration // the expiry
		wantErr string        // what the error says ("" for none)
	}{
		{"", 10 * time.Second, ""},
		{"3s", 3 * time.Second, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"10", 0, "is not a duration"},
		{"soon", 0, "is not a duration"},
		{"0s", 0, "must be positive"},
		{"-1s", 0, "must be positive"},
	}
	for _, tt := range tests {
		got, err := orderExpiryFromEnv(func(k string) string {
			if k == EnvOrderExpiry {
				return tt.value
			}
			return ""
		})
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("%q: %v, %v; want %v", tt.value, got, err, tt.want)
			}
			continue
		}
		var ce *trellis.ConfigError
		if !errors.As(err, &ce) || ce.Var != EnvOrderExpiry || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%q: %v, %v; want a ConfigError on %s saying %q", tt.value, got, err, EnvOrderExpiry, tt.wantErr)
		}
	}
}
