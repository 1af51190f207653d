// Package store connects the service to the Redis of its state store: it
// turns a URL into a client (one Redis or a Redis Cluster), checks at
// start-up that Redis takes the URL's settings, sends the client's own
// messages to the service's logger, keeps URLs (which may hold a
// password) out of messages, and says which Redis errors mean that the
// store is unavailable (components.ErrUnavailable), and batches the
// scripts that wait for a busy slot into one pipeline (Batcher). Package
// trellis names the settings; this package knows only go-redis.
package store

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterStateReload is how often the cluster client re-reads the slot map.
const clusterStateReload = time.Second

// sendOnce is go-redis's MaxRetries for "no retries": the client sends a
// command at most once. Its retries resend a command whose reply was lost
// (a read timeout, a connection closed mid-reply), which would apply a
// write twice and hide that the first attempt may have applied it: the
// last attempt's error ("connection refused") would then claim that
// nothing was changed (see ClassifyWrite). The callers retry instead,
// knowing what they retry: a timer's call by its own schedule, a client's
// request by its Idempotency-Key.
const sendOnce = -1

// CheckURL checks a one-Redis URL; the error says what is wrong without
// the URL.
func CheckURL(url string) error {
	if _, err := redis.ParseURL(url); err != nil {
		return errors.New("not a valid Redis URL (want redis://[user:password@]host:port/db or rediss://...): " + Redact(err, url))
	}
	return nil
}

// CheckClusterURL checks a Redis Cluster URL; the error says what is wrong
// without the URL.
func CheckClusterURL(url string) error {
	if _, err := redis.ParseClusterURL(url); err != nil {
		return errors.New("not a valid Redis Cluster URL (want redis://[user:password@]host:port?addr=host:port&addr=host:port): " +
			Redact(err, url))
	}
	return nil
}

// Conn is an open client of the state store's Redis.
type Conn struct {
	// Client is one Redis's client or a Redis Cluster's.
	Client redis.UniversalClient
	// Desc describes it for the start-up log line (never the password).
	Desc []any
	log  *slog.Logger
}

// Open connects to the Redis Cluster at clusterURL when it is set, else
// to the Redis at url; with neither it returns nil (no Redis: the
// embedded store). The client's own messages go to log until Close.
// Open does not wait for Redis: see Check.
func Open(url, clusterURL string, log *slog.Logger) (*Conn, error) {
	var c *Conn
	switch {
	case clusterURL != "":
		opts, err := redis.ParseClusterURL(clusterURL)
		if err != nil {
			return nil, fmt.Errorf("open the Redis Cluster: %s", Redact(err, clusterURL))
		}
		// go-redis re-reads the slot map on a MOVED reply, but not when
		// a master stops answering: then only every ClusterStateReloadInterval
		// (60 s by default). Once a second, the service follows a failover
		// about a second after the promotion, for one CLUSTER SLOTS a second.
		opts.ClusterStateReloadInterval = clusterStateReload
		opts.ContextTimeoutEnabled = true
		opts.MaxRetries = sendOnce
		c = &Conn{Client: redis.NewClusterClient(opts), Desc: []any{"cluster", strings.Join(opts.Addrs, ",")}}
	case url != "":
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("open Redis: %s", Redact(err, url))
		}
		// A request's deadline bounds its Redis calls, whatever read timeout
		// the URL sets: a hung Redis must not hold a request past its own.
		opts.ContextTimeoutEnabled = true
		opts.MaxRetries = sendOnce
		c = &Conn{Client: redis.NewClient(opts), Desc: []any{"addr", opts.Addr, "db", opts.DB}}
	default:
		return nil, nil
	}
	c.log = log
	logTo(c.Client, log)
	return c, nil
}

// Close closes the client; its messages no longer go to its logger.
func (c *Conn) Close() error {
	forget(c.log)
	return c.Client.Close()
}

// Redact is err's message with each secret (a Redis URL, which may hold
// a password) replaced.
func Redact(err error, secrets ...string) string {
	msg := err.Error()
	for _, secret := range secrets {
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "<the URL>")
		}
	}
	return msg
}
