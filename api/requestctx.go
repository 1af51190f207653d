package api

import (
	"context"
	"log/slog"
)

// The service's middleware puts the request id and the logger into each
// request's context; the helpers here read them back so that an error
// response and its log line carry the same correlation id.

// HeaderRequestID carries the request id: the service takes it from the
// request when it is a sane one, generates one otherwise, and always
// echoes it in the response.
const HeaderRequestID = "X-Request-Id"

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
)

// ContextWithRequestID returns ctx carrying the request id id.
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID is the request id in ctx ("" when there is none): the
// X-Request-Id response header, and the correlation id of server errors.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// ContextWithLogger returns ctx carrying the logger l.
func ContextWithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

// Logger is the logger in ctx, or slog.Default() when there is none.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.Default()
}
