package trellis

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/timers"
)

// settings is every field of Config, each with its name, its variable and
// flag (for those read from the environment), its default and its check,
// side by side: DefaultConfig, withDefaults, ConfigFromEnv, ConfigUsage
// and Validate are all made from it, so a new setting is one entry here
// (and its field). Validate checks them in this order.
var settings = []setting{
	field[string]{
		about: about{name: "HTTPAddr", env: EnvHTTPAddr, flag: "addr", usage: "HTTP listen address"},
		def:   ":9000", at: func(c *Config) *string { return &c.HTTPAddr },
		rule: checkAddr,
	},
	field[string]{
		about: about{name: "RedisURL", env: EnvRedisURL, flag: "redis-url",
			usage: "Redis URL of the state store; empty: in-memory, not durable"},
		at:   func(c *Config) *string { return &c.RedisURL },
		rule: checkRedisURL,
	},
	field[string]{
		about: about{name: "RedisClusterURL", env: EnvRedisClusterURL, flag: "redis-cluster-url",
			usage: "Redis Cluster of the state store, redis://host:port?addr=host:port&addr=host:port; instead of -redis-url"},
		at:   func(c *Config) *string { return &c.RedisClusterURL },
		rule: checkClusterURL,
	},
	field[string]{
		about: about{name: "RedisPrefix", env: EnvRedisPrefix, flag: "redis-prefix",
			usage: "prefix of every Redis key; services with different prefixes can share a Redis database"},
		def: "trellis", at: func(c *Config) *string { return &c.RedisPrefix },
		rule: checkRedisPrefix,
	},
	field[string]{
		about: about{name: "AdminToken", env: EnvAdminToken, flag: "admin-token",
			usage: "bearer token of the admin API; prefer the env var, flags show in ps"},
		at:   func(c *Config) *string { return &c.AdminToken },
		rule: checkAdminToken,
	},
	field[slog.Level]{
		about: about{name: "LogLevel", env: EnvLogLevel, flag: "log-level", usage: "log level: debug, info, warn or error"},
		def:   slog.LevelInfo, at: func(c *Config) *slog.Level { return &c.LogLevel },
		parse: parseLevel, format: func(l slog.Level) string { return strings.ToLower(l.String()) },
	},
	field[int64]{
		about: about{name: "MaxBodyBytes"}, def: api.DefaultMaxBodyBytes,
		at: func(c *Config) *int64 { return &c.MaxBodyBytes }, rule: positive[int64],
	},
	field[time.Duration]{
		about: about{name: "RequestTimeout", env: EnvRequestTimeout, flag: "request-timeout",
			usage: "how long a request may take before it is answered 504"},
		def: 30 * time.Second, at: func(c *Config) *time.Duration { return &c.RequestTimeout },
		parse: parseDuration, format: time.Duration.String, rule: positive[time.Duration],
	},
	field[time.Duration]{
		about: about{name: "ShutdownTimeout"}, def: 30 * time.Second,
		at: func(c *Config) *time.Duration { return &c.ShutdownTimeout }, rule: positive[time.Duration],
	},
	field[time.Duration]{
		about: about{name: "IdempotencyRetention", env: EnvIdempotencyRetention, flag: "idempotency-retention",
			usage: "how long the answer of a request or command made with an idempotency key is kept for its retries"},
		def: api.DefaultIdempotencyRetention, at: func(c *Config) *time.Duration { return &c.IdempotencyRetention },
		parse: parseDuration, format: time.Duration.String, rule: positive[time.Duration],
	},
	field[int]{
		about: about{name: "MaxConnections"}, def: 4096,
		at: func(c *Config) *int { return &c.MaxConnections }, rule: positive[int],
	},
	field[string]{
		about: about{name: "ClusterAddr", env: EnvClusterAddr, flag: "cluster-addr",
			usage: "listen address of the instance-to-instance port, with a Redis store (empty: " + DefaultClusterAddr + "); off: no cluster"},
		at: func(c *Config) *string { return &c.ClusterAddr }, rule: checkClusterAddr,
	},
	field[string]{
		about: about{name: "ClusterAdvertiseAddr", env: EnvClusterAdvertiseAddr, flag: "cluster-advertise-addr",
			usage: "host:port the other instances reach the cluster port at; empty: the cluster address, with this machine's private address for a host left out"},
		at: func(c *Config) *string { return &c.ClusterAdvertiseAddr }, rule: checkAdvertiseAddr,
	},
	field[string]{
		about: about{name: "ClusterSecret", env: EnvClusterSecret},
		at:    func(c *Config) *string { return &c.ClusterSecret }, rule: checkClusterSecret,
	},
	field[string]{
		about: about{name: "ClusterTLSCert", env: EnvClusterTLSCert, flag: "cluster-tls-cert",
			usage: "PEM file of this instance's certificate for mutual TLS on the cluster port (with -cluster-tls-key and -cluster-tls-ca); empty: cleartext"},
		at: func(c *Config) *string { return &c.ClusterTLSCert }, rule: checkClusterTLS(EnvClusterTLSCert),
	},
	field[string]{
		about: about{name: "ClusterTLSKey", env: EnvClusterTLSKey, flag: "cluster-tls-key",
			usage: "PEM file of the key of -cluster-tls-cert"},
		at: func(c *Config) *string { return &c.ClusterTLSKey }, rule: checkClusterTLS(EnvClusterTLSKey),
	},
	field[string]{
		about: about{name: "ClusterTLSCA", env: EnvClusterTLSCA, flag: "cluster-tls-ca",
			usage: "PEM file of the cluster's CA, which signs every instance's certificate"},
		at: func(c *Config) *string { return &c.ClusterTLSCA }, rule: checkClusterTLS(EnvClusterTLSCA),
	},
	field[time.Duration]{
		about: about{name: "ClusterLease", env: EnvClusterLease, flag: "cluster-lease",
			usage: "how long a member stays one without renewing: a killed instance's entities are served again after about this"},
		def: cluster.DefaultLease, at: func(c *Config) *time.Duration { return &c.ClusterLease },
		parse: parseDuration, format: time.Duration.String, rule: checkLease,
	},
	field[time.Duration]{
		about: about{name: "TimerDeadLetterRetention", env: EnvTimerDeadLetterRetention, flag: "timer-dead-letter-retention",
			usage: "how long a timer that gave up is kept as a dead letter, to be retried or deleted"},
		def: timers.DefaultDeadLetterRetention, at: func(c *Config) *time.Duration { return &c.TimerDeadLetterRetention },
		parse: parseDuration, format: time.Duration.String, rule: positive[time.Duration],
	},
}

// setting is one entry of the settings table.
type setting interface {
	meta() about
	// setDefault sets the field to its default; fillZero does so only
	// when the field is zero.
	setDefault(c *Config)
	fillZero(c *Config)
	// text is the field as the flag shows it; set parses a text into the
	// field (an error's message is the reason it is invalid).
	text(c Config) string
	set(c *Config, text string) error
	// check is Validate's rule (an error's message is the reason).
	check(c Config) error
}

// about names a setting.
type about struct {
	name  string // the Config field
	env   string // its environment variable; "" for a setting only code sets
	flag  string // its flag, without the dash (with env only)
	usage string // the flag's help, before " (env …)"
}

func (a about) meta() about { return a }

// error is the *ConfigError of the setting for reason.
func (a about) error(reason error) *ConfigError {
	if a.env == "" {
		return &ConfigError{Var: "Config." + a.name, Reason: reason.Error()}
	}
	if a.flag == "" {
		return &ConfigError{Var: a.env, Reason: reason.Error()}
	}
	return &ConfigError{Var: a.env, Flag: "-" + a.flag, Reason: reason.Error()}
}

// field is a setting of type T. A string needs no parse or format.
type field[T comparable] struct {
	about
	def    T
	at     func(*Config) *T
	parse  func(string) (T, error)   // nil: T is string
	format func(T) string            // nil: T is string, or the setting has no variable
	rule   func(v T, c Config) error // nil: any value
}

func (f field[T]) setDefault(c *Config) { *f.at(c) = f.def }

func (f field[T]) fillZero(c *Config) {
	var zero T
	if p := f.at(c); *p == zero {
		*p = f.def
	}
}

func (f field[T]) text(c Config) string {
	v := *f.at(&c)
	if f.format != nil {
		return f.format(v)
	}
	s, _ := any(v).(string)
	return s
}

func (f field[T]) set(c *Config, text string) error {
	if f.parse == nil {
		s, ok := any(&text).(*T)
		if !ok {
			return fmt.Errorf("setting %s has no parser", f.name)
		}
		*f.at(c) = *s
		return nil
	}
	v, err := f.parse(text)
	if err != nil {
		return err
	}
	*f.at(c) = v
	return nil
}

func (f field[T]) check(c Config) error {
	if f.rule == nil {
		return nil
	}
	return f.rule(*f.at(&c), c)
}

// minAdminTokenLen: the admin token is a shared secret; a short one can be
// guessed.
const minAdminTokenLen = 16

func positive[T int | int64 | time.Duration](v T, _ Config) error {
	if v <= 0 {
		return errors.New("must be positive")
	}
	return nil
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
	return 0, fmt.Errorf("%q is not a level: want debug, info, warn or error", s)
}

func checkAddr(addr string, _ Config) error {
	bad := func(why string) error {
		return fmt.Errorf("%q is not a listen address (want host:port or :port): %s", addr, why)
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

func checkRedisURL(url string, _ Config) error {
	if url == "" {
		return nil
	}
	return store.CheckURL(url)
}

// checkClusterURL: at most one of the two Redis settings, and a URL
// go-redis's cluster client takes.
func checkClusterURL(url string, c Config) error {
	switch {
	case url == "":
		return nil
	case c.RedisURL != "":
		return errors.New("is set together with " + EnvRedisURL + " (-redis-url): set " + EnvRedisURL +
			" for one Redis or " + EnvRedisClusterURL + " for a Redis Cluster, not both")
	}
	return store.CheckClusterURL(url)
}

// checkRedisPrefix checks the rule stated on [Config.RedisPrefix], which
// package keyspace owns.
func checkRedisPrefix(p string, _ Config) error {
	var pe *keyspace.PrefixError
	if err := keyspace.CheckPrefix(p); errors.As(err, &pe) {
		return errors.New(pe.Reason)
	}
	return nil
}

func checkAdminToken(token string, _ Config) error {
	switch {
	case token == "":
		return nil
	case utf8.RuneCountInString(token) < minAdminTokenLen:
		return fmt.Errorf("must be at least %d characters (it is a shared secret: try `openssl rand -hex 32`)", minAdminTokenLen)
	case strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return errors.New("must not contain spaces or control characters")
	}
	return nil
}

// checkClusterAddr: off, or a listen address; set, with a Redis store to
// coordinate on (the embedded store is one instance's alone).
func checkClusterAddr(addr string, c Config) error {
	if addr == "" || addr == ClusterOff {
		return nil
	}
	if c.RedisURL == "" && c.RedisClusterURL == "" {
		return errors.New("is set, but the store is the embedded one: a cluster needs " + EnvRedisURL +
			" or " + EnvRedisClusterURL + " (the instances coordinate in Redis)")
	}
	return checkAddr(addr, c)
}

// checkAdvertiseAddr: with a cluster, a host:port whose port is a number
// (a host left out is filled in at start).
func checkAdvertiseAddr(addr string, c Config) error {
	if addr == "" || !c.clustered() {
		return nil
	}
	return checkAddr(addr, c)
}

// checkClusterSecret: with a cluster, a secret long enough not to be
// guessed, or none (the one kept in Redis). Its value is never part of an
// error.
func checkClusterSecret(secret string, c Config) error {
	if secret == "" || !c.clustered() {
		return nil
	}
	if len(secret) < peer.MinSecretLen {
		return fmt.Errorf("is %d bytes; at least %d (try `openssl rand -hex 32`)", len(secret), peer.MinSecretLen)
	}
	return nil
}

// checkClusterTLS is the rule of the TLS file named by setting: with a
// cluster, the three files of TLS on the cluster port are set, readable
// and go together, or none is set. It reports what is wrong with its own
// file only.
func checkClusterTLS(setting string) func(string, Config) error {
	return func(_ string, c Config) error {
		files := c.clusterTLS()
		if !files.Set() || !c.clustered() {
			return nil
		}
		var te *peer.TLSError
		if _, _, err := files.Load(); errors.As(err, &te) && te.Setting == setting {
			return te.Err
		}
		return nil
	}
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (like 10s or 1m30s)", s)
	}
	return d, nil
}

// minLease: the members renew every lease/3; under a second, a GC pause
// or a slow Redis reply would cost a member its shards.
const minLease = time.Second

func checkLease(d time.Duration, _ Config) error {
	if d < minLease {
		return fmt.Errorf("is %v; at least %v (members renew every third of it)", d, minLease)
	}
	return nil
}
