package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/timers"
)

// nextRunsShown is how many run times a recurring timer shows.
const nextRunsShown = 5

// PutRecurringTimer answers PUT /admin/timers/{name}: it stores a recurring
// timer under name, replacing any timer of that name, and returns it.
func (a *server) PutRecurringTimer(w http.ResponseWriter, r *http.Request, name string) {
	var req adminapi.RecurringTimerRequest
	if err := api.Decode(r, &req); err != nil {
		api.WriteError(w, r, err)
		return
	}
	sc, err := scheduleOf(req.Schedule)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	if req.MaxRetries < 0 {
		api.WriteError(w, r, api.InvalidField("maxRetries", "must not be negative"))
		return
	}
	call := components.DeferredCall{ComponentID: req.ComponentId, Method: req.Method, EntityID: req.EntityId, Argument: req.Payload}
	t, err := a.timers.CreateRecurring(r.Context(), name, sc, call, timers.WithMaxRetries(req.MaxRetries))
	if err != nil {
		api.WriteError(w, r, recurringError(err))
		return
	}
	api.WriteJSON(w, r, http.StatusOK, timerJSON(t))
}

// PauseTimer answers POST /admin/timers/{name}/pause.
func (a *server) PauseTimer(w http.ResponseWriter, r *http.Request, name string) {
	a.setPaused(w, r, name, a.timers.Pause)
}

// ResumeTimer answers POST /admin/timers/{name}/resume.
func (a *server) ResumeTimer(w http.ResponseWriter, r *http.Request, name string) {
	a.setPaused(w, r, name, a.timers.Resume)
}

func (a *server) setPaused(w http.ResponseWriter, r *http.Request, name string, op func(ctx context.Context, name string) (timers.Timer, error)) {
	t, err := op(r.Context(), name)
	var se *timers.ScheduleError
	switch {
	case errors.Is(err, timers.ErrNotFound):
		api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("no timer is named %q", name))
	case errors.As(err, &se):
		api.WriteError(w, r, recurringError(err))
	case errors.Is(err, timers.ErrInvalid):
		api.WriteProblem(w, r, http.StatusConflict, fmt.Sprintf("timer %q is not a recurring timer", name))
	case err != nil:
		api.WriteError(w, r, err)
	default:
		api.WriteJSON(w, r, http.StatusOK, timerJSON(t))
	}
}

// scheduleOf reads the contract's schedule, whose JSON is the one
// timers.Schedule reads: a duration that does not parse is a
// *timers.ScheduleError naming its field.
func scheduleOf(s adminapi.Schedule) (timers.Schedule, error) {
	var out timers.Schedule
	b, err := json.Marshal(s)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	return out, recurringError(err)
}

// recurringError turns a *timers.ScheduleError into a 400 naming its
// field under schedule, and an invalid call into one naming the call.
func recurringError(err error) error {
	var se *timers.ScheduleError
	if errors.As(err, &se) {
		return &api.RequestError{Status: http.StatusBadRequest, Detail: "the request is invalid",
			Fields: []api.FieldError{{Field: "schedule." + se.Field, Message: se.Reason}}, Err: err}
	}
	if errors.Is(err, timers.ErrInvalid) {
		return &api.RequestError{Status: http.StatusBadRequest, Detail: "the request is invalid",
			Fields: []api.FieldError{{Field: "call", Message: err.Error()}}, Err: err}
	}
	return err
}

// recurrenceJSON is a recurring timer's schedule as the contract shows
// it (timers.Schedule writes the contract's JSON).
func recurrenceJSON(rc *timers.Recurrence) adminapi.Recurrence {
	out := adminapi.Recurrence{Run: rc.Run.UTC(), Paused: rc.Paused, NextRuns: []time.Time{}}
	if b, err := json.Marshal(rc.Schedule); err == nil {
		_ = json.Unmarshal(b, &out.Schedule)
	}
	for _, t := range rc.NextRuns(nextRunsShown) {
		out.NextRuns = append(out.NextRuns, t.UTC())
	}
	return out
}
