package store

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// go-redis has one logger for the whole process, which writes plain text
// to stderr. Open replaces it, once, with slogRedis, which writes each
// message as JSON to the logger of the service whose client it is about:
// every client Open makes carries a hook that puts its service's logger
// into the context of its commands, dials and pipelines, and go-redis
// logs with that context. The few messages logged without one (a panic
// in a pool goroutine) go to the logger of the client opened last that
// is still open.

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
		return next(h.with(ctx), network, addr)
	}
}

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
