package httpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"

	"github.com/trellis-go/trellis/api"
)

// maxRequestIDLen bounds a request id taken from a client.
const maxRequestIDLen = 128

// requestID gives each request an id, in its context (api.RequestID), in
// the X-Request-Id response header, and on its logger.
func requestID(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(api.HeaderRequestID)
			if !saneRequestID(id) {
				id = uuid.NewString()
			}
			w.Header().Set(api.HeaderRequestID, id)
			ctx := api.ContextWithRequestID(r.Context(), id)
			ctx = api.ContextWithLogger(ctx, logger)
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// saneRequestID accepts a client's id only if it cannot forge log lines or
// headers: 1 to 128 characters of [A-Za-z0-9._:-].
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// accessLog logs one line per request, after it: method, path, status,
// bytes, duration (durationMs) and request id. Probes (/healthz, /readyz)
// and scrapes (/metrics) log at debug, so that they do not drown the rest.
func accessLog(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			defer func() {
				status := statusOf(ww)
				level := slog.LevelInfo
				if quietPath(r.URL.Path) {
					level = slog.LevelDebug
				}
				logger.LogAttrs(r.Context(), level, "http request",
					slog.String("method", r.Method),
					slog.String("path", r.URL.Path),
					slog.Int("status", status),
					slog.Int("bytes", ww.BytesWritten()),
					slog.Float64("durationMs", float64(time.Since(start).Microseconds())/1000),
					slog.String("requestId", api.RequestID(r.Context())),
				)
			}()
			next.ServeHTTP(ww, r)
		})
	}
}

// recoverPanics turns a panic in a handler into a 500 problem with the
// request id as its correlation id; the panic value and the stack go to the
// log only. http.ErrAbortHandler is re-raised: it is how a handler asks
// net/http to abort the response.
func recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			ctx := r.Context()
			api.Logger(ctx).LogAttrs(ctx, slog.LevelError, "handler panicked",
				slog.String("requestId", api.RequestID(ctx)),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("panic", fmt.Sprint(v)),
				slog.String("stack", string(debug.Stack())),
			)
			if sw, ok := w.(interface{ Status() int }); ok && sw.Status() != 0 {
				return // the response has begun: nothing sane can be added
			}
			api.WriteProblem(w, r, http.StatusInternalServerError, "Unexpected error")
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody refuses bodies larger than limit (or, on a path of large,
// that path's limit) with 413: at once when the Content-Length says so,
// else when the handler reads past the limit (api.Decode answers the
// *http.MaxBytesError with 413).
func limitBody(limit int64, large map[string]int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			limit := limit
			if l, ok := large[r.URL.Path]; ok {
				limit = l
			}
			if r.ContentLength > limit {
				api.WriteProblem(w, r, http.StatusRequestEntityTooLarge,
					fmt.Sprintf("the request body is larger than %d bytes", limit))
				return
			}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = http.MaxBytesReader(w, r.Body, limit)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// timeout bounds each request: its context (calls that outlive it fail
// with context.DeadlineExceeded, which api.WriteError answers with 504)
// and the reading of its body, which must have arrived by the same
// deadline (api.Decode answers a body that has not with 408). A body is of
// no use after the deadline, since nothing can be done with it by then;
// without the bound, a client that announces a body and never sends it
// would hold its connection forever. A 1 MiB body within the default 30 s
// needs 35 KB/s.
func timeout(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			// Not every writer can (a recorder in a test): then only the
			// server's own timeouts apply. A request without a body has
			// nothing left to read, and net/http sets the connection's read
			// deadline afresh for the next request.
			if r.Body != nil && r.Body != http.NoBody {
				deadline, _ := ctx.Deadline()
				_ = http.NewResponseController(w).SetReadDeadline(deadline)
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// statusOf is the status the handler answered with through ww: 200 when
// it wrote nothing, as net/http answers then.
func statusOf(ww middleware.WrapResponseWriter) int {
	if status := ww.Status(); status != 0 {
		return status
	}
	return http.StatusOK
}
