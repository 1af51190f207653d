package trellis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// redisLog is where the Redis client's own messages go. go-redis has one
// logger for the whole process, which writes plain text to stderr; the
// service replaces it with this one, which writes them to the logger of
// the service started last, as JSON like every other line.
var redisLog atomic.Pointer[slog.Logger]

// slogRedisLogger is go-redis's Logging on top of redisLog.
type slogRedisLogger struct{}

// Printf logs one message of the Redis client at warn level: go-redis
// logs only what went wrong (a dial that failed, a connection dropped).
func (slogRedisLogger) Printf(ctx context.Context, format string, v ...any) {
	l := redisLog.Load()
	if l == nil {
		return
	}
	l.LogAttrs(ctx, slog.LevelWarn, "redis client: "+strings.TrimSpace(fmt.Sprintf(format, v...)),
		slog.String("component", "redis"))
}

// logRedisTo sends the Redis client's messages to l from now on.
func logRedisTo(l *slog.Logger) {
	redisLog.Store(l)
	redis.SetLogger(slogRedisLogger{})
}
