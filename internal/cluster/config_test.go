package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestJoinRefusesBadConfig: a bad setting is refused before Redis is
// touched, with an error wrapping ErrBadConfig that names what is wrong.
func TestJoinRefusesBadConfig(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer client.Close()
	good := testConfig(client, "t", "a1")
	for _, tc := range []struct {
		name   string
		change func(*Config)
		wantIn string
	}{
		{"no client", func(c *Config) { c.Client = nil }, "Client is nil"},
		{"bad prefix", func(c *Config) { c.Prefix = "a{b}" }, "in one slot"},
		{"empty id", func(c *Config) { c.ID = "" }, "ID is empty"},
		{"id with a colon", func(c *Config) { c.ID = "a:b" }, `':' at byte 1`},
		{"long id", func(c *Config) { c.ID = strings.Repeat("x", 65) }, "at most 64"},
		{"empty addr", func(c *Config) { c.Addr = "" }, "not host:port"},
		{"addr without port", func(c *Config) { c.Addr = "10.0.0.1" }, "not host:port"},
		{"addr without host", func(c *Config) { c.Addr = ":7000" }, "has no host"},
		{"addr with bad port", func(c *Config) { c.Addr = "h:70000" }, "from 1 to 65535"},
		{"addr with named port", func(c *Config) { c.Addr = "h:http" }, "from 1 to 65535"},
		{"zero lease", func(c *Config) { c.Lease = 0 }, "Lease is 0s: it must be positive"},
		{"negative lease", func(c *Config) { c.Lease = -time.Second }, "must be positive"},
		{"sub-ms lease", func(c *Config) { c.Lease = 1500 * time.Microsecond }, "whole number of milliseconds"},
		{"negative margin", func(c *Config) { c.Margin = -1 }, "must not be negative"},
		{"margin eats the lease", func(c *Config) { c.Margin = 600 * time.Millisecond }, "serving window of 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.change(&cfg)
			m, err := Join(t.Context(), cfg)
			if m != nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.wantIn) {
				t.Fatalf("Join = %v, %v; want ErrBadConfig mentioning %q", m, err, tc.wantIn)
			}
		})
	}
}
