package trellis

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/entities"
)

// pingTimeout bounds the store ping of /readyz, so that a probe gets its
// answer before its own timeout.
const pingTimeout = 2 * time.Second

var healthOK = []byte(`{"status":"ok"}` + "\n")

// healthz answers 200 while the process serves HTTP: liveness only.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	_, _ = w.Write(healthOK)
}

// readyz answers 200 when the store answers a ping, else 503: readiness
// to take traffic. Why the store failed goes to the log only.
func readyz(store entities.Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
		defer cancel()
		if err := store.Ping(ctx); err != nil {
			api.Logger(ctx).LogAttrs(ctx, slog.LevelWarn, "not ready: the store does not answer",
				slog.String("requestId", api.RequestID(ctx)), slog.String("err", err.Error()))
			api.WriteProblem(w, r, http.StatusServiceUnavailable, "the state store is not reachable")
			return
		}
		w.Header().Set("Content-Type", api.ContentTypeJSON)
		_, _ = w.Write(healthOK)
	}
}
