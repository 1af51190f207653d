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
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/keyspace"
)

// Config is the service's configuration. [ConfigFromEnv] reads the
// environment variables and flags named on each field; the other fields
// keep the defaults of [DefaultConfig] unless code sets them. As with
// timers.Config and entities.Host, a field left at its zero value takes
// its default when the service is built (New); a value set to something
// invalid is an error naming it.
type Config struct {
	// HTTPAddr is the HTTP listen address (TRELLIS_HTTP_ADDR, -addr;
	// default ":9000").
	HTTPAddr string
	// RedisURL is the Redis of the state store, redis://[user:password@]host:port/db
	// or rediss:// for TLS (TRELLIS_REDIS_URL, -redis-url). Empty: the
	// embedded in-memory store, which is not durable.
	RedisURL string
	// RedisClusterURL selects a Redis Cluster for the state store instead,
	// in go-redis's cluster URL form
	// redis://[user:password@]host:port?addr=host:port&addr=host:port
	// (TRELLIS_REDIS_CLUSTER_URL, -redis-cluster-url). At most one of
	// RedisURL and RedisClusterURL may be set.
	RedisClusterURL string
	// RedisPrefix starts every key the service writes to Redis, followed
	// by ':' (TRELLIS_REDIS_PREFIX, -redis-prefix; default "trellis").
	// Instances with the same prefix share their entities and timers;
	// instances with different ones can share a Redis database without
	// seeing each other's. It is 1 to 64 characters of A-Z a-z 0-9
	// . _ - : and does not end in ':'. It holds no braces: Trellis puts
	// the Redis Cluster hash tags into its keys itself (package keyspace).
	RedisPrefix string
	// AdminToken is the bearer token of the admin API (TRELLIS_ADMIN_TOKEN,
	// -admin-token); empty disables the admin API. At least 16 characters
	// (Unicode characters, not bytes).
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
	// ShutdownTimeout is how long Run waits for in-flight requests and
	// entities when it stops (default 30 s).
	ShutdownTimeout time.Duration
	// MaxConnections caps the open HTTP connections (default 4096). At
	// the cap a new connection closes the one that has been quiet the
	// longest, so that health probes get through a flood of stalled
	// clients.
	MaxConnections int
}

// The environment variables ConfigFromEnv reads.
const (
	EnvHTTPAddr    = "TRELLIS_HTTP_ADDR"
	EnvRedisURL    = "TRELLIS_REDIS_URL"
	EnvRedisPrefix = "TRELLIS_REDIS_PREFIX"
	EnvAdminToken  = "TRELLIS_ADMIN_TOKEN"
	EnvLogLevel    = "TRELLIS_LOG_LEVEL"
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
		MaxConnections:  4096,
	}
}

// withDefaults fills the zero fields with those of DefaultConfig. The
// zero LogLevel is info, the default already.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.HTTPAddr == "" {
		c.HTTPAddr = d.HTTPAddr
	}
	if c.RedisPrefix == "" {
		c.RedisPrefix = d.RedisPrefix
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = d.MaxConnections
	}
	return c
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
//
// appFlags define the application's own flags on the same flag set,
// beside Trellis's (fs.StringVar(&s, "greeting", …)); they are set once
// ConfigFromEnv returns without error. [Run] passes those of [WithFlags].
func ConfigFromEnv(getenv func(string) string, args []string, appFlags ...func(fs *flag.FlagSet)) (Config, error) {
	cfg := DefaultConfig()
	s := settings{
		addr:        envOr(getenv, EnvHTTPAddr, cfg.HTTPAddr),
		redisURL:    getenv(EnvRedisURL),
		clusterURL:  getenv(EnvRedisClusterURL),
		redisPrefix: envOr(getenv, EnvRedisPrefix, cfg.RedisPrefix),
		token:       getenv(EnvAdminToken),
		level:       envOr(getenv, EnvLogLevel, "info"),
	}
	fs := newFlagSet(&s, appFlags)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q: the server takes only flags", fs.Args())
	}
	lvl, err := parseLevel(s.level)
	if err != nil {
		return Config{}, err
	}
	cfg.HTTPAddr, cfg.RedisURL, cfg.RedisPrefix, cfg.AdminToken, cfg.LogLevel = s.addr, s.redisURL, s.redisPrefix, s.token, lvl
	cfg.RedisClusterURL = s.clusterURL
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ConfigUsage describes the flags and variables, for -h, with the
// application's flags appFlags.
func ConfigUsage(appFlags ...func(fs *flag.FlagSet)) string {
	d := DefaultConfig()
	fs := newFlagSet(&settings{addr: d.HTTPAddr, redisPrefix: d.RedisPrefix, level: "info"}, appFlags)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return "Usage of " + programName() + " (each flag overrides its environment variable):\n" + b.String()
}

// settings are the configuration's flags as text, before they are parsed
// and validated; each starts as its environment variable or default.
type settings struct {
	addr, redisURL, clusterURL, redisPrefix, token, level string
}

// newFlagSet binds the flags to s, each defaulting to what s holds, and
// adds the application's.
func newFlagSet(s *settings, appFlags []func(*flag.FlagSet)) *flag.FlagSet {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; main prints them once
	fs.StringVar(&s.addr, "addr", s.addr, "HTTP listen address (env "+EnvHTTPAddr+")")
	fs.StringVar(&s.redisURL, "redis-url", s.redisURL, "Redis URL of the state store; empty: in-memory, not durable (env "+EnvRedisURL+")")
	fs.StringVar(&s.clusterURL, "redis-cluster-url", s.clusterURL, "Redis Cluster of the state store, redis://host:port?addr=host:port&addr=host:port; instead of -redis-url (env "+EnvRedisClusterURL+")")
	fs.StringVar(&s.redisPrefix, "redis-prefix", s.redisPrefix, "prefix of every Redis key; services with different prefixes can share a Redis database (env "+EnvRedisPrefix+")")
	fs.StringVar(&s.token, "admin-token", s.token, "bearer token of the admin API; prefer the env var, flags show in ps (env "+EnvAdminToken+")")
	fs.StringVar(&s.level, "log-level", s.level, "log level: debug, info, warn or error (env "+EnvLogLevel+")")
	for _, add := range appFlags {
		add(fs)
	}
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
	if err := validateRedisClusterURL(c); err != nil {
		return err
	}
	if err := validateRedisPrefix(c.RedisPrefix); err != nil {
		return err
	}
	if c.AdminToken != "" {
		if utf8.RuneCountInString(c.AdminToken) < minAdminTokenLen {
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
	if c.MaxConnections <= 0 {
		return &ConfigError{Var: "Config.MaxConnections", Reason: "must be positive"}
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

// validateRedisPrefix checks the rule stated on [Config.RedisPrefix], which
// package keyspace owns.
func validateRedisPrefix(p string) error {
	var pe *keyspace.PrefixError
	if err := keyspace.CheckPrefix(p); errors.As(err, &pe) {
		return &ConfigError{Var: EnvRedisPrefix, Flag: "-redis-prefix", Reason: pe.Reason}
	}
	return nil
}

// redact keeps a Redis URL (which may hold a password) out of an error.
func redact(err error, secrets ...string) string {
	msg := err.Error()
	for _, secret := range secrets {
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "<the URL>")
		}
	}
	return msg
}
