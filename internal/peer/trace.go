package peer

import (
	"context"
	"net/http"

	"github.com/trellis-go/trellis/internal/tracing"
)

// traceHeaders are the W3C trace context a forwarded call carries, so
// that the command on the owner continues the caller's trace. Header
// values hold no newline, which the signature relies on.
type traceHeaders struct{ parent, state string }

// injectTrace writes ctx's trace context into h, and returns it.
func injectTrace(ctx context.Context, h http.Header) traceHeaders {
	tracing.Inject(ctx, h)
	return readTrace(h)
}

// readTrace is the trace context h carries.
func readTrace(h http.Header) traceHeaders {
	return traceHeaders{parent: h.Get(tracing.HeaderTraceparent), state: h.Get(tracing.HeaderTracestate)}
}
