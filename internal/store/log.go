package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// go-redis has one logger for the whole process, which writes plain text
// to stderr. Open replaces it, once, with slogRedis, which writes each
// message as JSON to the logger of the service whose client it is about.
// Every client Open makes carries a hook that tells: it puts the client's
// logger into the context of its commands and pipelines, which go-redis
// logs with, and into the errors of its dials (the message most often
// logged, a failed dial, is logged with a context of the pool's own, but
// quotes the dial's error). The few messages that carry neither (a panic
// in a pool goroutine) go to the logger of the client opened last that is
// still open.

// loggerKey is the context key of a client's logger.
type loggerKey struct{}

var (
	installOnce sync.Once
	openMu      sync.Mutex
	open        []*slog.Logger // the loggers of the open clients, oldest first
)

// logTo sends the messages about client to log until the client is closed.
func logTo(client redis.UniversalClient, log *slog.Logger) {
	if log == nil {
		return
	}
	installOnce.Do(func() { redis.SetLogger(slogRedis{}) })
	openMu.Lock()
	open = append(open, log)
	openMu.Unlock()
	client.AddHook(loggerHook{log: log})
}

// forget drops log from the fallback list, once its client is closed.
func forget(log *slog.Logger) {
	openMu.Lock()
	defer openMu.Unlock()
	for i := len(open) - 1; i >= 0; i-- {
		if open[i] == log {
			open = append(open[:i], open[i+1:]...)
			return
		}
	}
}

// fallback is the logger of the client opened last that is still open.
func fallback() *slog.Logger {
	openMu.Lock()
	defer openMu.Unlock()
	if len(open) == 0 {
		return nil
	}
	return open[len(open)-1]
}

// slogRedis is go-redis's Logging on top of the loggers of the clients.
type slogRedis struct{}

// Printf logs one message of the Redis client at warn level: go-redis
// logs only what went wrong (a dial that failed, a connection dropped).
func (slogRedis) Printf(ctx context.Context, format string, v ...any) {
	l, _ := ctx.Value(loggerKey{}).(*slog.Logger)
	for _, arg := range v {
		var de *dialError
		if err, ok := arg.(error); ok && l == nil && errors.As(err, &de) {
			l = de.log
		}
	}
	if l == nil {
		l = fallback()
	}
	if l == nil {
		return
	}
	l.LogAttrs(ctx, slog.LevelWarn, "redis client: "+strings.TrimSpace(fmt.Sprintf(format, v...)),
		slog.String("component", "redis"))
}

// loggerHook puts its client's logger into the context of everything the
// client does.
type loggerHook struct{ log *slog.Logger }

func (h loggerHook) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, loggerKey{}, h.log)
}

func (h loggerHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(h.with(ctx), network, addr)
		var ne net.Error
		if err != nil && errors.As(err, &ne) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = &dialError{err: ne, log: h.log}
		}
		return conn, err
	}
}

// dialError is a failed dial of a client, with the client's logger. It is
// the net.Error it holds in every other way: its message, its timeout,
// what it wraps.
type dialError struct {
	err net.Error
	log *slog.Logger
}

func (e *dialError) Error() string   { return e.err.Error() }
func (e *dialError) Timeout() bool   { return e.err.Timeout() }
func (e *dialError) Temporary() bool { return e.err.Temporary() } //nolint:staticcheck // net.Error still declares it, and go-redis may ask
func (e *dialError) Unwrap() error   { return e.err }

func (h loggerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return next(h.with(ctx), cmd)
	}
}

func (h loggerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return next(h.with(ctx), cmds)
	}
}
