package trellis

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
	"github.com/trellis-go/trellis/api"
)

// Config is the service's configuration. [ConfigFromEnv] reads the
// environment variables and flags named on each field; the other fields
// keep the defaults of [DefaultConfig] unless code sets them.
type Config struct {
	// HTTPAddr is the HTTP listen address (TRELLIS_HTTP_ADDR, -addr;
	// default ":9000").
	HTTPAddr string
	// RedisURL is the Redis of the state store, redis://[user:password@]host:port/db
	// or rediss:// for TLS (TRELLIS_REDIS_URL, -redis-url). Empty: the
	// embedded in-memory store, which is not durable.
	RedisURL string
	// RedisPrefix starts every key the service writes to Redis, so several
	// services can share one Redis (default "trellis").
	RedisPrefix string
	// AdminToken is the bearer token of the admin API (TRELLIS_ADMIN_TOKEN,
	// -admin-token); empty disables the admin API. At least 16 characters.
	AdminToken string
	// LogLevel is the minimum level logged (TRELLIS_LOG_LEVEL, -log-level:
	// debug, info, warn or error; default info).
	LogLevel slog.Level
	// MaxBodyBytes is the largest request body accepted; larger ones get
	// 413 (default 1 MiB).
	MaxBodyBytes int64
	// RequestTimeout bounds each request; one that takes longer gets 504
	// (default 30 s).
	RequestTimeout time.Duration
	// ShutdownTimeout is how long cmd/server waits for in-flight requests
	// and entities when it stops (default 30 s).
	ShutdownTimeout time.Duration
}

// The environment variables ConfigFromEnv reads.
const (
	EnvHTTPAddr   = "TRELLIS_HTTP_ADDR"
	EnvRedisURL   = "TRELLIS_REDIS_URL"
	EnvAdminToken = "TRELLIS_ADMIN_TOKEN"
	EnvLogLevel   = "TRELLIS_LOG_LEVEL"
)

// minAdminTokenLen: the admin token is a shared secret; a short one can be
// guessed.
const minAdminTokenLen = 16

// DefaultConfig is the configuration with nothing set: the embedded store
// on :9000.
func DefaultConfig() Config {
	return Config{
		HTTPAddr:        ":9000",
		RedisPrefix:     "trellis",
		LogLevel:        slog.LevelInfo,
		MaxBodyBytes:    api.DefaultMaxBodyBytes,
		RequestTimeout:  30 * time.Second,
		ShutdownTimeout: 30 * time.Second,
	}
}

// ConfigError is an invalid setting, named by its environment variable
// (and the flag that overrides it).
type ConfigError struct {
	Var    string // the environment variable, e.g. TRELLIS_LOG_LEVEL
	Flag   string // the flag, e.g. -log-level ("" when there is none)
	Reason string // what is wrong; never the value of a secret
}

func (e *ConfigError) Error() string {
	if e.Flag == "" {
		return e.Var + ": " + e.Reason
	}
	return e.Var + " (" + e.Flag + "): " + e.Reason
}

// ConfigFromEnv reads the configuration from the environment (getenv) and
// the command-line flags args (without the program name), flags winning,
// and validates it. An invalid setting is a *ConfigError naming its
// variable; -h is flag.ErrHelp (see [ConfigUsage]).
func ConfigFromEnv(getenv func(string) string, args []string) (Config, error) {
	cfg := DefaultConfig()
	addr := envOr(getenv, EnvHTTPAddr, cfg.HTTPAddr)
	redisURL := getenv(EnvRedisURL)
	token := getenv(EnvAdminToken)
	level := envOr(getenv, EnvLogLevel, "info")

	fs := newFlagSet(&addr, &redisURL, &token, &level)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q: the server takes only flags", fs.Args())
	}
	lvl, err := parseLevel(level)
	if err != nil {
		return Config{}, err
	}
	cfg.HTTPAddr, cfg.RedisURL, cfg.AdminToken, cfg.LogLevel = addr, redisURL, token, lvl
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ConfigUsage describes the flags and variables, for -h.
func ConfigUsage() string {
	a, r, t, l := DefaultConfig().HTTPAddr, "", "", "info"
	fs := newFlagSet(&a, &r, &t, &l)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return "Usage of server (each flag overrides its environment variable):\n" + b.String()
}

func newFlagSet(addr, redisURL, token, level *string) *flag.FlagSet {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; main prints them once
	fs.StringVar(addr, "addr", *addr, "HTTP listen address (env "+EnvHTTPAddr+")")
	fs.StringVar(redisURL, "redis-url", *redisURL, "Redis URL of the state store; empty: in-memory, not durable (env "+EnvRedisURL+")")
	fs.StringVar(token, "admin-token", *token, "bearer token of the admin API; prefer the env var, flags show in ps (env "+EnvAdminToken+")")
	fs.StringVar(level, "log-level", *level, "log level: debug, info, warn or error (env "+EnvLogLevel+")")
	return fs
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, &ConfigError{Var: EnvLogLevel, Flag: "-log-level", Reason: fmt.Sprintf("%q is not a level: want debug, info, warn or error", s)}
}

// Validate checks every setting; the first invalid one is a *ConfigError.
func (c Config) Validate() error {
	if err := validateAddr(c.HTTPAddr); err != nil {
		return err
	}
	if c.RedisURL != "" {
		if _, err := redis.ParseURL(c.RedisURL); err != nil {
			return &ConfigError{Var: EnvRedisURL, Flag: "-redis-url", Reason: "not a valid Redis URL (want redis://[user:password@]host:port/db or rediss://...): " + redact(err, c.RedisURL)}
		}
	}
	if c.RedisPrefix == "" {
		return &ConfigError{Var: "Config.RedisPrefix", Reason: "must not be empty"}
	}
	if c.AdminToken != "" {
		if len(c.AdminToken) < minAdminTokenLen {
			return &ConfigError{Var: EnvAdminToken, Flag: "-admin-token", Reason: fmt.Sprintf("must be at least %d characters (it is a shared secret: try `openssl rand -hex 32`)", minAdminTokenLen)}
		}
		if strings.IndexFunc(c.AdminToken, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return &ConfigError{Var: EnvAdminToken, Flag: "-admin-token", Reason: "must not contain spaces or control characters"}
		}
	}
	if c.MaxBodyBytes <= 0 {
		return &ConfigError{Var: "Config.MaxBodyBytes", Reason: "must be positive"}
	}
	if c.RequestTimeout <= 0 {
		return &ConfigError{Var: "Config.RequestTimeout", Reason: "must be positive"}
	}
	if c.ShutdownTimeout <= 0 {
		return &ConfigError{Var: "Config.ShutdownTimeout", Reason: "must be positive"}
	}
	return nil
}

func validateAddr(addr string) error {
	bad := func(why string) error {
		return &ConfigError{Var: EnvHTTPAddr, Flag: "-addr", Reason: fmt.Sprintf("%q is not a listen address (want host:port or :port): %s", addr, why)}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return bad(ae.Err)
		}
		return bad(err.Error())
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return bad("the port must be a number from 0 to 65535")
	}
	return nil
}

// redact keeps a Redis URL (which may hold a password) out of an error.
func redact(err error, secret string) string {
	msg := err.Error()
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "<the URL>")
	}
	return msg
}
