package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/trellis-go/trellis/components"
	"net/http"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/views"
	"github.com/trellis-go/trellis/workflows"
)

// server implements the admin routes of the contract (package
// api/admin) on the service's timer scheduler and its cluster. The router
// mounts it behind adminAuth, so its handlers run only for the admin
// token's holder.
type server struct {
	timers    *timers.Scheduler
	cluster   Cluster               // nil when the instance is not part of a cluster
	consumers *consumers.Runner     // nil: the service runs none
	views     *views.Runner         // nil: the service runs none
	journals  entities.JournalStore // nil: the store keeps none
	registry  *components.Registry  // nil: no load checks
	workflows *workflows.Runners    // nil: the service runs none
}

var _ adminapi.ServerInterface = (*server)(nil)

// ListTimers answers GET /admin/timers: one page of the timers that match
// the filters, in run order, with the cursor of the next page.
func (a *server) ListTimers(w http.ResponseWriter, r *http.Request, params adminapi.ListTimersParams) {
	q, err := listQuery(params)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	page, err := a.timers.List(r.Context(), q)
	if err != nil {
		listError(w, r, q, err)
		return
	}
	// Never null: an empty page is "timers": [].
	out := adminapi.TimerPage{Timers: make([]adminapi.Timer, 0, len(page.Timers)), NextCursor: page.NextCursor}
	for _, t := range page.Timers {
		out.Timers = append(out.Timers, timerJSON(t))
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// GetTimerStats answers GET /admin/timers/stats with the store-wide counts.
func (a *server) GetTimerStats(w http.ResponseWriter, r *http.Request) {
	st, err := a.timers.Stats(r.Context())
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, adminapi.TimerStats{
		Active: st.Active, Failing: st.Failing, Limit: st.Limit, DueWithin1m: st.DueWithin1m, DeadLetters: st.DeadLetters,
	})
}

// GetTimer answers GET /admin/timers/{name}: the timer, or 404.
func (a *server) GetTimer(w http.ResponseWriter, r *http.Request, name string) {
	t, err := a.timers.Get(r.Context(), name)
	if errors.Is(err, timers.ErrNotFound) {
		api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("no timer is named %q", name))
		return
	}
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, timerJSON(t))
}

// DeleteTimer answers DELETE /admin/timers/{name} with 204, whether or not
// the timer existed: it may have run already, and the caller's intent
// (the timer must not run) holds either way.
func (a *server) DeleteTimer(w http.ResponseWriter, r *http.Request, name string) {
	if err := a.timers.Delete(r.Context(), name); err != nil {
		api.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// AcknowledgeWipe answers POST /admin/timers/wipe/acknowledge with 204: the
// operator has seen that the timer store was wiped, so this instance stops
// reporting it (its /readyz returns to 200 if nothing else is wrong).
func (a *server) AcknowledgeWipe(w http.ResponseWriter, r *http.Request) {
	if err := a.timers.AcknowledgeWipe(r.Context()); err != nil {
		api.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// timerJSON is a timer as the contract shows it. Times are in UTC; the
// payload is the call's argument as the JSON value it is.
func timerJSON(t timers.Timer) adminapi.Timer {
	out := adminapi.Timer{
		Name:        t.Name,
		ComponentId: t.Call.ComponentID,
		Method:      t.Call.Method,
		EntityId:    t.Call.EntityID,
		DueAt:       t.DueAt.UTC(),
		CreatedAt:   t.CreatedAt.UTC(),
		Attempts:    t.Attempts,
		MaxRetries:  t.MaxRetries,
		LastError:   t.LastError,
	}
	if !t.LastAttemptAt.IsZero() {
		out.LastAttemptAt = t.LastAttemptAt.UTC()
	}
	if t.Recurring != nil {
		out.Recurring = recurrenceJSON(t.Recurring)
	}
	// Create accepts only valid JSON arguments; the check keeps a damaged
	// stored argument from failing the encoding of a whole page.
	if len(t.Call.Argument) > 0 && json.Valid(t.Call.Argument) {
		out.Payload = t.Call.Argument
	}
	return out
}
