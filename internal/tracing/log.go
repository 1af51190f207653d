package tracing

import (
	"context"
	"encoding/hex"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The log attributes that join a line to its span.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler wraps h so that every record logged with a context that
// holds a span carries the span's trace_id and span_id.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ next slog.Handler }

func (l logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.next.Enabled(ctx, level)
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		tid, sid := sc.TraceID(), sc.SpanID()
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, hexString(tid[:])), slog.String(LogSpanID, hexString(sid[:])))
	}
	return l.next.Handle(ctx, r)
}

// hexString is id in lower-case hex, in one allocation (the ids' String
// methods take two).
func hexString(id []byte) string {
	var buf [2 * len(trace.TraceID{})]byte
	n := hex.Encode(buf[:], id)
	return string(buf[:n])
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.next.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.next.WithGroup(name)} }
