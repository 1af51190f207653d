package httpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/timers"
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

// Readiness is what /readyz asks: the state store (Ping), the timer
// scheduler (Ready) and the application's own checks, if any.
type Readiness struct {
	Store  interface{ Ping(context.Context) error }
	Timers interface{ Ready(context.Context) error }
	Checks *Checks
}

// readyz answers 200 when the store answers a ping and the timer scheduler
// is sound, else 503: readiness to take traffic. A wiped Redis (the timers
// it held are gone) keeps the service unready until an operator has looked.
// Why goes to the log, and a short reason to the caller.
func readyz(rd Readiness) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
		defer cancel()
		if err := rd.Store.Ping(ctx); err != nil {
			notReady(w, r, storeNotReady(err), err)
			return
		}
		if err := rd.Timers.Ready(ctx); err != nil {
			reason := "the timer scheduler is not ready"
			if errors.Is(err, timers.ErrStoreWiped) {
				reason = "the timer store was wiped: timers created before may be lost"
			}
			notReady(w, r, reason, err)
			return
		}
		if name, err := rd.Checks.Run(ctx); err != nil {
			notReady(w, r, name+" is not ready", err)
			return
		}
		w.Header().Set("Content-Type", api.ContentTypeJSON)
		_, _ = w.Write(healthOK)
	}
}

// storeNotReady is the reason /readyz gives for a failed store ping: what
// Redis answered when it answered with an error (a database index out of
// range, a login refused, still loading), since retrying will not cure
// the first two and an operator needs the words to fix them; else that it
// is not reachable (the address and the network error go to the log only).
func storeNotReady(err error) string {
	if reply, ok := store.Reply(err); ok {
		return "the state store refuses: " + reply
	}
	return "the state store is not reachable"
}

func notReady(w http.ResponseWriter, r *http.Request, reason string, err error) {
	ctx := r.Context()
	api.Logger(ctx).LogAttrs(ctx, slog.LevelWarn, "not ready: "+reason,
		slog.String("requestId", api.RequestID(ctx)), slog.String("err", err.Error()))
	api.WriteProblem(w, r, http.StatusServiceUnavailable, reason)
}
