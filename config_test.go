package trellis_test

import (
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"

	"github.com/trellis-go/trellis"
)

// TestConfigFromEnv pins the defaults, the variables, the flags that
// override them, and that every invalid setting is an error naming its
// variable (and never echoing a secret).
func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name      string            // case name
		env       map[string]string // environment variables
		args      []string          // command-line flags
		want      func(c trellis.Config) bool
		wantVar   string // the variable a *ConfigError must name ("" when none)
		wantErr   string // substring of the error ("" for no error)
		forbidden string // text the error must not contain (a secret)
	}{
		{name: "defaults", want: func(c trellis.Config) bool {
			return c.HTTPAddr == ":9000" && c.RedisURL == "" && c.AdminToken == "" && c.LogLevel == slog.LevelInfo
		}},
		{name: "from env", env: map[string]string{
			"TRELLIS_HTTP_ADDR":   "127.0.0.1:8080",
			"TRELLIS_REDIS_URL":   "redis://127.0.0.1:6379/2",
			"TRELLIS_ADMIN_TOKEN": "0123456789abcdef",
			"TRELLIS_LOG_LEVEL":   "DEBUG",
		}, want: func(c trellis.Config) bool {
			return c.HTTPAddr == "127.0.0.1:8080" && c.RedisURL == "redis://127.0.0.1:6379/2" &&
				c.AdminToken == "0123456789abcdef" && c.LogLevel == slog.LevelDebug
		}},
		{name: "flags override env", env: map[string]string{"TRELLIS_HTTP_ADDR": ":8080", "TRELLIS_LOG_LEVEL": "warn"},
			args: []string{"-addr", ":7000", "-log-level", "error", "-redis-url", "rediss://r:6380/0"},
			want: func(c trellis.Config) bool {
				return c.HTTPAddr == ":7000" && c.LogLevel == slog.LevelError && c.RedisURL == "rediss://r:6380/0"
			}},
		{name: "invalid log level", env: map[string]string{"TRELLIS_LOG_LEVEL": "verbose"}, wantVar: "TRELLIS_LOG_LEVEL", wantErr: "verbose"},
		{name: "invalid log level by flag", args: []string{"-log-level", "loud"}, wantVar: "TRELLIS_LOG_LEVEL", wantErr: "-log-level"},
		{name: "address without port", env: map[string]string{"TRELLIS_HTTP_ADDR": "localhost"}, wantVar: "TRELLIS_HTTP_ADDR", wantErr: "missing port"},
		{name: "port out of range", env: map[string]string{"TRELLIS_HTTP_ADDR": ":99999"}, wantVar: "TRELLIS_HTTP_ADDR", wantErr: "0 to 65535"},
		{name: "redis URL of another scheme", env: map[string]string{"TRELLIS_REDIS_URL": "mysql://u:s3cret-pw@db:3306/x"},
			wantVar: "TRELLIS_REDIS_URL", wantErr: "not a valid Redis URL", forbidden: "s3cret-pw"},
		{name: "redis URL that does not parse", env: map[string]string{"TRELLIS_REDIS_URL": "redis://u:s3cret-pw@host:port/0"},
			wantVar: "TRELLIS_REDIS_URL", wantErr: "not a valid Redis URL", forbidden: "s3cret-pw"},
		{name: "admin token too short", env: map[string]string{"TRELLIS_ADMIN_TOKEN": "short-s3cret"},
			wantVar: "TRELLIS_ADMIN_TOKEN", wantErr: "at least 16", forbidden: "short-s3cret"},
		{name: "admin token with a space", env: map[string]string{"TRELLIS_ADMIN_TOKEN": "0123456789 abcdef-s3cret"},
			wantVar: "TRELLIS_ADMIN_TOKEN", wantErr: "spaces", forbidden: "s3cret"},
		{name: "unknown flag", args: []string{"-nope"}, wantErr: "-nope"},
		{name: "stray argument", args: []string{"serve"}, wantErr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := trellis.ConfigFromEnv(func(k string) string { return tt.env[k] }, tt.args)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !tt.want(cfg) {
					t.Fatalf("got %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if tt.wantVar != "" {
				var ce *trellis.ConfigError
				if !errors.As(err, &ce) || ce.Var != tt.wantVar || !strings.HasPrefix(err.Error(), tt.wantVar) {
					t.Fatalf("err = %v, want a *ConfigError naming %s first", err, tt.wantVar)
				}
			}
			if tt.forbidden != "" && strings.Contains(err.Error(), tt.forbidden) {
				t.Fatalf("err = %v: it reveals the secret", err)
			}
		})
	}
}

// TestConfigHelp: -h is flag.ErrHelp, and the usage names every variable.
func TestConfigHelp(t *testing.T) {
	_, err := trellis.ConfigFromEnv(func(string) string { return "" }, []string{"-h"})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	usage := trellis.ConfigUsage()
	for _, v := range []string{"TRELLIS_HTTP_ADDR", "TRELLIS_REDIS_URL", "TRELLIS_ADMIN_TOKEN", "TRELLIS_LOG_LEVEL"} {
		if !strings.Contains(usage, v) {
			t.Errorf("usage does not mention %s:\n%s", v, usage)
		}
	}
}
