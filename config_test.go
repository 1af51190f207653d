package trellis_test

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
)

// TestConfigFromEnv pins the defaults, the variables, the flags that
// override them, and that every invalid setting is an error naming its
// variable (and never echoing a secret).
// clusterSecret is a cluster secret of the right length.
const clusterSecret = "0123456789abcdef0123456789abcdef-s3cret"

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
			return c.HTTPAddr == ":9000" && c.RedisURL == "" && c.RedisPrefix == "trellis" && c.AdminToken == "" && c.LogLevel == slog.LevelInfo
		}},
		{name: "from env", env: map[string]string{
			"TRELLIS_HTTP_ADDR":    "127.0.0.1:8080",
			"TRELLIS_REDIS_URL":    "redis://127.0.0.1:6379/2",
			"TRELLIS_REDIS_PREFIX": "shop-eu",
			"TRELLIS_ADMIN_TOKEN":  "0123456789abcdef",
			"TRELLIS_LOG_LEVEL":    "DEBUG",
		}, want: func(c trellis.Config) bool {
			return c.HTTPAddr == "127.0.0.1:8080" && c.RedisURL == "redis://127.0.0.1:6379/2" && c.RedisPrefix == "shop-eu" &&
				c.AdminToken == "0123456789abcdef" && c.LogLevel == slog.LevelDebug
		}},
		{name: "flags override env", env: map[string]string{"TRELLIS_HTTP_ADDR": ":8080", "TRELLIS_LOG_LEVEL": "warn", "TRELLIS_REDIS_PREFIX": "shop-eu"},
			args: []string{"-addr", ":7000", "-log-level", "error", "-redis-url", "rediss://r:6380/0", "-redis-prefix", "shop-us"},
			want: func(c trellis.Config) bool {
				return c.HTTPAddr == ":7000" && c.LogLevel == slog.LevelError && c.RedisURL == "rediss://r:6380/0" && c.RedisPrefix == "shop-us"
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
		{name: "cluster", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": "10.0.0.5:9100",
			"TRELLIS_CLUSTER_SECRET": clusterSecret}, want: func(c trellis.Config) bool {
			return c.ClusterAddr == "10.0.0.5:9100" && c.ClusterSecret == clusterSecret && c.ClusterLease == 10*time.Second
		}},
		{name: "cluster advertised", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": ":9100",
			"TRELLIS_CLUSTER_SECRET": clusterSecret}, args: []string{"-cluster-advertise-addr", "node-2.internal:9100"},
			want: func(c trellis.Config) bool { return c.ClusterAdvertiseAddr == "node-2.internal:9100" }},
		{name: "cluster on the embedded store", env: map[string]string{"TRELLIS_CLUSTER_ADDR": "10.0.0.5:9100", "TRELLIS_CLUSTER_SECRET": clusterSecret},
			wantVar: "TRELLIS_CLUSTER_ADDR", wantErr: "needs TRELLIS_REDIS_URL"},
		{name: "cluster address without a host", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": ":9100"},
			want: func(c trellis.Config) bool { return c.ClusterAddr == ":9100" && c.ClusterAdvertiseAddr == "" }},
		{name: "cluster advertised without a port", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0",
			"TRELLIS_CLUSTER_ADVERTISE_ADDR": "node-2.internal"}, wantVar: "TRELLIS_CLUSTER_ADVERTISE_ADDR", wantErr: "missing port"},
		{name: "cluster by default, without a secret", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0"},
			want: func(c trellis.Config) bool { return c.ClusterAddr == "" && c.ClusterSecret == "" }},
		{name: "cluster off", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": "off",
			"TRELLIS_CLUSTER_SECRET": "short-but-unused"}, want: func(c trellis.Config) bool { return c.ClusterAddr == trellis.ClusterOff }},
		{name: "cluster address that is no address", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": "no"},
			wantVar: "TRELLIS_CLUSTER_ADDR", wantErr: "not a listen address"},
		{name: "cluster secret too short", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": "10.0.0.5:9100",
			"TRELLIS_CLUSTER_SECRET": "short-s3cret"}, wantVar: "TRELLIS_CLUSTER_SECRET", wantErr: "at least 32", forbidden: "short-s3cret"},
		{name: "cluster lease", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": "10.0.0.5:9100",
			"TRELLIS_CLUSTER_SECRET": clusterSecret, "TRELLIS_CLUSTER_LEASE": "3s"}, want: func(c trellis.Config) bool { return c.ClusterLease == 3*time.Second }},
		{name: "cluster lease too short", env: map[string]string{"TRELLIS_CLUSTER_LEASE": "500ms"}, wantVar: "TRELLIS_CLUSTER_LEASE", wantErr: "at least 1s"},
		{name: "cluster lease not a duration", args: []string{"-cluster-lease", "ten"}, wantVar: "TRELLIS_CLUSTER_LEASE", wantErr: "not a duration"},
		{name: "dead letter retention", args: []string{"-timer-dead-letter-retention", "2h"},
			want: func(c trellis.Config) bool { return c.TimerDeadLetterRetention == 2*time.Hour }},
		{name: "dead letter retention by default", want: func(c trellis.Config) bool { return c.TimerDeadLetterRetention == 7*24*time.Hour }},
		{name: "dead letter retention not positive", env: map[string]string{"TRELLIS_TIMER_DEAD_LETTER_RETENTION": "0s"},
			wantVar: "TRELLIS_TIMER_DEAD_LETTER_RETENTION", wantErr: "positive"},
		{name: "dead letter retention not a duration", args: []string{"-timer-dead-letter-retention", "week"},
			wantVar: "TRELLIS_TIMER_DEAD_LETTER_RETENTION", wantErr: "not a duration"},
		{name: "request timeout and key retention", env: map[string]string{"TRELLIS_REQUEST_TIMEOUT": "5s"}, args: []string{"-idempotency-retention", "1h"},
			want: func(c trellis.Config) bool {
				return c.RequestTimeout == 5*time.Second && c.IdempotencyRetention == time.Hour
			}},
		{name: "request timeout and key retention by default", want: func(c trellis.Config) bool {
			return c.RequestTimeout == 30*time.Second && c.IdempotencyRetention == 24*time.Hour
		}},
		{name: "request timeout not positive", env: map[string]string{"TRELLIS_REQUEST_TIMEOUT": "-1s"},
			wantVar: "TRELLIS_REQUEST_TIMEOUT", wantErr: "positive"},
		{name: "key retention not a duration", args: []string{"-idempotency-retention", "a day"},
			wantVar: "TRELLIS_IDEMPOTENCY_RETENTION", wantErr: "not a duration"},
		{name: "cluster port out of range", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": "10.0.0.5:99999",
			"TRELLIS_CLUSTER_SECRET": clusterSecret}, wantVar: "TRELLIS_CLUSTER_ADDR", wantErr: "0 to 65535"},
		{name: "cluster TLS without its key", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0",
			"TRELLIS_CLUSTER_TLS_CERT": "/nonexistent/cert.pem", "TRELLIS_CLUSTER_TLS_CA": "/nonexistent/ca.pem"},
			wantVar: "TRELLIS_CLUSTER_TLS_KEY", wantErr: "is not set"},
		{name: "cluster TLS file missing", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0"},
			args:    []string{"-cluster-tls-cert", "/nonexistent/cert.pem", "-cluster-tls-key", "/nonexistent/key.pem", "-cluster-tls-ca", "/nonexistent/ca.pem"},
			wantVar: "TRELLIS_CLUSTER_TLS_CERT", wantErr: "no such file"},
		{name: "cluster TLS with the cluster off", env: map[string]string{"TRELLIS_REDIS_URL": "redis://127.0.0.1:6379/0", "TRELLIS_CLUSTER_ADDR": "off",
			"TRELLIS_CLUSTER_TLS_CERT": "/nonexistent/cert.pem"}, want: func(c trellis.Config) bool { return c.ClusterTLSCert == "/nonexistent/cert.pem" }},
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
	for _, v := range []string{"TRELLIS_HTTP_ADDR", "TRELLIS_REDIS_URL", "TRELLIS_REDIS_PREFIX", "TRELLIS_ADMIN_TOKEN", "TRELLIS_LOG_LEVEL"} {
		if !strings.Contains(usage, v) {
			t.Errorf("usage does not mention %s:\n%s", v, usage)
		}
	}
}

// TestConfigRedisPrefix pins the rule of TRELLIS_REDIS_PREFIX: 1 to 64
// characters of A-Z a-z 0-9 . _ - :, not ending in ':'. Every refusal
// is a *ConfigError naming the variable and its flag.
func TestConfigRedisPrefix(t *testing.T) {
	tests := []struct {
		name    string   // case name
		env     string   // TRELLIS_REDIS_PREFIX ("" for unset)
		args    []string // command-line flags
		want    string   // the prefix configured, when accepted
		wantErr string   // substring of the error ("" for none)
	}{
		{name: "unset is the default", want: "trellis"},
		{name: "letters, digits and dashes", env: "shop-eu-2", want: "shop-eu-2"},
		{name: "nested with colons", env: "acme:shop.v2_a", want: "acme:shop.v2_a"},
		{name: "cluster hash tag", env: "{trellis}", wantErr: "would put every key of the service in one slot"},
		{name: "closing brace", env: "shop}", wantErr: `'}' at byte 4`},
		{name: "64 characters", env: strings.Repeat("p", 64), want: strings.Repeat("p", 64)},
		{name: "flag wins over env", env: "from-env", args: []string{"-redis-prefix", "from-flag"}, want: "from-flag"},
		{name: "empty by flag", env: "shop", args: []string{"-redis-prefix", ""}, wantErr: "must not be empty"},
		{name: "65 characters", env: strings.Repeat("p", 65), wantErr: "65 characters long; at most 64"},
		{name: "trailing colon", env: "shop:", wantErr: `"shop:" ends in ':'`},
		{name: "only a colon", env: ":", wantErr: "ends in ':'"},
		{name: "space", env: "my shop", wantErr: `' ' at byte 2`},
		{name: "tab", env: "shop\t", wantErr: `'\t' at byte 4`},
		{name: "newline", env: "shop\nx", wantErr: `'\n' at byte 4`},
		{name: "glob star", env: "shop*", wantErr: `'*' at byte 4`},
		{name: "glob question mark", env: "sh?p", wantErr: `'?' at byte 2`},
		{name: "glob bracket", env: "shop[1]", wantErr: `'[' at byte 4`},
		{name: "backslash", env: `shop\x`, wantErr: `'\\' at byte 4`},
		{name: "slash", env: "acme/shop", wantErr: "use only letters"},
		{name: "non-ASCII letter", env: "café", wantErr: `'é' at byte 3`},
		{name: "invalid UTF-8", env: "shop\xff", wantErr: "at byte 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"TRELLIS_REDIS_PREFIX": tt.env}
			cfg, err := trellis.ConfigFromEnv(func(k string) string { return env[k] }, tt.args)
			if tt.wantErr == "" {
				if err != nil || cfg.RedisPrefix != tt.want {
					t.Fatalf("prefix %q, err %v; want %q", cfg.RedisPrefix, err, tt.want)
				}
				return
			}
			var ce *trellis.ConfigError
			if !errors.As(err, &ce) || ce.Var != "TRELLIS_REDIS_PREFIX" || ce.Flag != "-redis-prefix" ||
				!strings.HasPrefix(err.Error(), "TRELLIS_REDIS_PREFIX (-redis-prefix): ") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want a *ConfigError on TRELLIS_REDIS_PREFIX (-redis-prefix) containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestConfigValidateRedisPrefix: a prefix set in code (as the test kit
// does) is held to the same rule as the variable.
func TestConfigValidateRedisPrefix(t *testing.T) {
	tests := []struct {
		prefix  string // Config.RedisPrefix
		wantErr string // substring of the error ("" for none)
	}{
		{prefix: "trellis-test-ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
		{prefix: "", wantErr: "must not be empty"},
		{prefix: "a b", wantErr: "' ' at byte 1"},
	}
	for _, tt := range tests {
		cfg := trellis.DefaultConfig()
		cfg.RedisPrefix = tt.prefix
		err := cfg.Validate()
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Validate with prefix %q: %v, want error containing %q", tt.prefix, err, tt.wantErr)
		}
	}
}

// New takes the zero fields of its Config as the defaults, like
// timers.Config and entities.Host, and refuses a field set to something
// invalid, naming it.
func TestNewZeroConfigIsTheDefaults(t *testing.T) {
	noRoutes := func(*trellis.Host, chi.Router) error { return nil }
	tests := []struct {
		name    string         // case name
		cfg     trellis.Config // what New is given
		wantErr string         // what the error says ("" for none)
	}{
		{"zero", trellis.Config{}, ""},
		{"negative request timeout", trellis.Config{RequestTimeout: -time.Second}, "TRELLIS_REQUEST_TIMEOUT"},
		{"negative body limit", trellis.Config{MaxBodyBytes: -1}, "Config.MaxBodyBytes"},
		{"short admin token", trellis.Config{AdminToken: "short"}, "TRELLIS_ADMIN_TOKEN"},
		// 18 bytes, 9 characters: the minimum counts characters.
		{"admin token of 9 characters in 18 bytes", trellis.Config{AdminToken: strings.Repeat("é", 9)}, "at least 16 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := trellis.New(tt.cfg, noRoutes, trellis.WithLogger(slog.New(slog.DiscardHandler)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = svc.Shutdown(context.Background()) }()
			got, want := svc.Host().Config, trellis.DefaultConfig()
			if got != want {
				t.Errorf("Host().Config = %+v, want the defaults %+v", got, want)
			}
		})
	}
}
