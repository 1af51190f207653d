package trellis

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/trellis-go/trellis/internal/peer"
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
	// 413 (default 1 MiB). The admin timer import takes up to 256 MiB (a
	// whole export), or MaxBodyBytes when that is more.
	MaxBodyBytes int64
	// RequestTimeout bounds each request; one that takes longer gets 504
	// (default 30 s).
	RequestTimeout time.Duration
	// ShutdownTimeout is how long Run waits for in-flight requests and
	// entities when it stops (default 30 s).
	ShutdownTimeout time.Duration
	// IdempotencyRetention is how long the answer of a request made with
	// an Idempotency-Key is kept for its retries (default 24 h; see
	// Host.Idempotent).
	IdempotencyRetention time.Duration
	// MaxConnections caps the open HTTP connections (default 4096). At
	// the cap a new connection closes the one that has been quiet the
	// longest, so that health probes get through a flood of stalled
	// clients.
	MaxConnections int
	// ClusterAddr is the listen address of the instance-to-instance port
	// (TRELLIS_CLUSTER_ADDR, -cluster-addr). With a Redis store the
	// instances that share the Redis and the prefix form a cluster: each
	// entity has one owner among them, which serves its reads from memory,
	// and any instance forwards a command to the owner through this port.
	// Empty: DefaultClusterAddr. ClusterOff ("off"): no cluster; each
	// instance acts alone on the shared store, checking the stored
	// revision on every command. The embedded store is one instance's
	// alone: no cluster, whatever this says.
	ClusterAddr string
	// ClusterAdvertiseAddr is the host:port at which the other instances
	// reach this one's cluster port (TRELLIS_CLUSTER_ADVERTISE_ADDR,
	// -cluster-advertise-addr). Empty: the listen address. A host left
	// out or unspecified (":25520", "0.0.0.0:25520") is this machine's
	// first private IPv4 address (a container's or a pod's), else its
	// first other non-loopback address, else 127.0.0.1; a port 0 is the
	// one the listener got.
	ClusterAdvertiseAddr string
	// ClusterSecret signs and checks every message between the instances
	// (TRELLIS_CLUSTER_SECRET only: never a flag); at least 32 bytes, the
	// same on every instance. The cluster port refuses anyone without it.
	// Empty: the instances share a random secret the first of them kept
	// in Redis, which keeps out whoever cannot read the service's Redis
	// (whoever can could rewrite its state anyway); set one to keep the
	// two apart.
	ClusterSecret string
	// ClusterTLSCert, ClusterTLSKey and ClusterTLSCA are the PEM files of
	// mutual TLS on the cluster port (TRELLIS_CLUSTER_TLS_CERT, _KEY, _CA;
	// -cluster-tls-cert, -key, -ca): this instance's certificate (with its
	// chain) and key, shown to the others both when it serves and when it
	// calls, and the cluster's own CA, which signs every instance's and
	// whose certificates are the only ones taken (the name in them is not
	// checked). All three or none; set on every instance or on none.
	// Empty: HTTP/2 over cleartext. The secret signs every message either
	// way.
	ClusterTLSCert, ClusterTLSKey, ClusterTLSCA string
	// ClusterLease is how long a member of the cluster stays a member
	// without renewing: an instance killed without a goodbye has its
	// entities served by the others about a lease and a few seconds later
	// (TRELLIS_CLUSTER_LEASE, -cluster-lease; default 10 s, at least 1 s;
	// see internal/cluster).
	ClusterLease time.Duration
	// TimerDeadLetterRetention is how long a timer whose retries ran out
	// is kept as a dead letter, to be listed, retried or deleted through
	// the admin API, before it is pruned (TRELLIS_TIMER_DEAD_LETTER_RETENTION,
	// -timer-dead-letter-retention; default 168h, positive).
	TimerDeadLetterRetention time.Duration
}

// The cluster's listen address by default, and the value that turns the
// cluster off (see Config.ClusterAddr).
const (
	DefaultClusterAddr = ":25520"
	ClusterOff         = "off"
)

// clustered reports whether the instance joins a cluster: a Redis store,
// and the cluster not turned off.
func (c Config) clustered() bool {
	return (c.RedisURL != "" || c.RedisClusterURL != "") && c.ClusterAddr != ClusterOff
}

// clusterTLS names the files of the cluster port's TLS.
func (c Config) clusterTLS() peer.TLSFiles {
	return peer.TLSFiles{Cert: c.ClusterTLSCert, Key: c.ClusterTLSKey, CA: c.ClusterTLSCA}
}

// clusterListenAddr is where the cluster port listens.
func (c Config) clusterListenAddr() string {
	if c.ClusterAddr == "" {
		return DefaultClusterAddr
	}
	return c.ClusterAddr
}

// The environment variables ConfigFromEnv reads.
const (
	EnvHTTPAddr             = "TRELLIS_HTTP_ADDR"
	EnvRedisURL             = "TRELLIS_REDIS_URL"
	EnvRedisClusterURL      = "TRELLIS_REDIS_CLUSTER_URL"
	EnvRedisPrefix          = "TRELLIS_REDIS_PREFIX"
	EnvAdminToken           = "TRELLIS_ADMIN_TOKEN"
	EnvLogLevel             = "TRELLIS_LOG_LEVEL"
	EnvClusterAddr          = "TRELLIS_CLUSTER_ADDR"
	EnvClusterAdvertiseAddr = "TRELLIS_CLUSTER_ADVERTISE_ADDR"
	EnvClusterLease         = "TRELLIS_CLUSTER_LEASE"
	EnvClusterTLSCert       = "TRELLIS_CLUSTER_TLS_CERT"
	EnvClusterTLSKey        = "TRELLIS_CLUSTER_TLS_KEY"
	EnvClusterTLSCA         = "TRELLIS_CLUSTER_TLS_CA"
	// EnvRequestTimeout is Config.RequestTimeout.
	EnvRequestTimeout = "TRELLIS_REQUEST_TIMEOUT"
	// EnvIdempotencyRetention is Config.IdempotencyRetention.
	EnvIdempotencyRetention = "TRELLIS_IDEMPOTENCY_RETENTION"
	// EnvTimerDeadLetterRetention is Config.TimerDeadLetterRetention.
	EnvTimerDeadLetterRetention = "TRELLIS_TIMER_DEAD_LETTER_RETENTION"
	// EnvClusterSecret is the secret the instances of a cluster sign
	// their messages to each other with; it has no flag (flags show in ps).
	EnvClusterSecret = "TRELLIS_CLUSTER_SECRET"
)

// DefaultConfig is the configuration with nothing set: the embedded store
// on :9000. The defaults are those of the settings table (settings.go).
func DefaultConfig() Config {
	var c Config
	for _, s := range settings {
		s.setDefault(&c)
	}
	return c
}

// withDefaults fills the zero fields with those of DefaultConfig.
func (c Config) withDefaults() Config {
	for _, s := range settings {
		s.fillZero(&c)
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
	// Each setting as text: its variable, else its default; then its flag.
	texts := make([]string, len(settings))
	for i, s := range settings {
		texts[i] = s.text(cfg)
		if env := s.meta().env; env != "" && getenv(env) != "" {
			texts[i] = getenv(env)
		}
	}
	fs := newFlagSet(texts, appFlags)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q: the server takes only flags", fs.Args())
	}
	for i, s := range settings {
		if s.meta().env == "" {
			continue
		}
		if err := s.set(&cfg, texts[i]); err != nil {
			return Config{}, s.meta().error(err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ConfigUsage describes the flags and variables, for -h, with the
// application's flags appFlags.
func ConfigUsage(appFlags ...func(fs *flag.FlagSet)) string {
	d := DefaultConfig()
	texts := make([]string, len(settings))
	for i, s := range settings {
		texts[i] = s.text(d)
	}
	fs := newFlagSet(texts, appFlags)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return "Usage of " + programName() + " (each flag overrides its environment variable):\n" + b.String()
}

// newFlagSet binds a flag to each setting that has one, texts[i] holding
// the text of settings[i] and its default, and adds the application's.
func newFlagSet(texts []string, appFlags []func(*flag.FlagSet)) *flag.FlagSet {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; main prints them once
	for i, s := range settings {
		if n := s.meta(); n.env != "" && n.flag != "" {
			fs.StringVar(&texts[i], n.flag, texts[i], n.usage+" (env "+n.env+")")
		}
	}
	for _, add := range appFlags {
		add(fs)
	}
	return fs
}

// Validate checks every setting; the first invalid one is a *ConfigError.
func (c Config) Validate() error {
	for _, s := range settings {
		if err := s.check(c); err != nil {
			return s.meta().error(err)
		}
	}
	return nil
}
