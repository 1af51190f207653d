package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
)

// TRELLIS_ORDER_EXPIRY (-order-expiry) is a positive Go duration, 10 s
// when unset; anything else is a ConfigError naming the variable and the
// flag.
func TestParseOrderExpiry(t *testing.T) {
	tests := []struct {
		value   string        // TRELLIS_ORDER_EXPIRY or -order-expiry
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
		got, err := parseOrderExpiry(tt.value)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("%q: %v, %v; want %v", tt.value, got, err, tt.want)
			}
			continue
		}
		var ce *trellis.ConfigError
		if !errors.As(err, &ce) || ce.Var != EnvOrderExpiry || ce.Flag != "-order-expiry" || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%q: %v, %v; want a ConfigError on %s saying %q", tt.value, got, err, EnvOrderExpiry, tt.wantErr)
		}
	}
}

// The flag defaults to the variable and overrides it.
func TestOrderExpiryFlag(t *testing.T) {
	tests := []struct {
		env  string   // TRELLIS_ORDER_EXPIRY
		args []string // the command line
		want string   // the text the flag leaves
	}{
		{"", nil, ""},
		{"3s", nil, "3s"},
		{"3s", []string{"-order-expiry", "5s"}, "5s"},
		{"", []string{"-order-expiry=1m"}, "1m"},
	}
	for _, tt := range tests {
		var got string
		fs := flag.NewFlagSet("server", flag.ContinueOnError)
		orderExpiryFlag(func(k string) string {
			if k == EnvOrderExpiry {
				return tt.env
			}
			return ""
		}, &got)(fs)
		if err := fs.Parse(tt.args); err != nil || got != tt.want {
			t.Errorf("env %q, args %q: %q, %v; want %q", tt.env, tt.args, got, err, tt.want)
		}
	}
}
