package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/timers"
)

// The dead-letter routes: the timers that gave up, listed, read, run again
// and deleted.

// ListDeadLetters answers GET /admin/dead-letters: one page of the dead
// letters that match, by time of death, with the cursor of the next page.
func (a *server) ListDeadLetters(w http.ResponseWriter, r *http.Request, params adminapi.ListDeadLettersParams) {
	lq, err := listQuery(adminapi.ListTimersParams{Name: params.Name, Limit: params.Limit, Cursor: params.Cursor,
		ComponentId: params.ComponentId, Method: params.Method, EntityId: params.EntityId})
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	page, err := a.timers.ListDeadLetters(r.Context(), timers.DeadLetterQuery{
		NameContains: lq.NameContains, Limit: lq.Limit, Cursor: lq.Cursor,
		ComponentID: lq.ComponentID, Method: lq.Method, EntityID: lq.EntityID,
	})
	if err != nil {
		listError(w, r, lq, err)
		return
	}
	// Never null: an empty page is "deadLetters": [].
	out := adminapi.DeadLetterPage{DeadLetters: make([]adminapi.DeadLetter, 0, len(page.DeadLetters)), NextCursor: page.NextCursor}
	for _, d := range page.DeadLetters {
		out.DeadLetters = append(out.DeadLetters, deadLetterJSON(d))
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// GetDeadLetter answers GET /admin/dead-letters/{name}: the dead letter,
// or 404.
func (a *server) GetDeadLetter(w http.ResponseWriter, r *http.Request, name string) {
	d, err := a.timers.GetDeadLetter(r.Context(), name)
	if err != nil {
		deadLetterError(w, r, name, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, deadLetterJSON(d))
}

// DeleteDeadLetter answers DELETE /admin/dead-letters/{name} with 204,
// whether or not it existed.
func (a *server) DeleteDeadLetter(w http.ResponseWriter, r *http.Request, name string) {
	if err := a.timers.DeleteDeadLetter(r.Context(), name); err != nil {
		api.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// RetryDeadLetter answers POST /admin/dead-letters/{name}/retry with the
// active timer the dead letter became; 404 without one, 409 while an
// active timer has the name.
func (a *server) RetryDeadLetter(w http.ResponseWriter, r *http.Request, name string) {
	t, err := a.timers.RetryDeadLetter(r.Context(), name)
	if err != nil {
		deadLetterError(w, r, name, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, timerJSON(t))
}

// deadLetterError answers a failed read or retry of the dead letter name.
func deadLetterError(w http.ResponseWriter, r *http.Request, name string, err error) {
	switch {
	case errors.Is(err, timers.ErrNotFound):
		api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("no dead letter is named %q", name))
	case errors.Is(err, timers.ErrNameTaken):
		api.WriteProblem(w, r, http.StatusConflict,
			fmt.Sprintf("an active timer is named %q; delete it, or let it run, before retrying the dead letter", name))
	default:
		api.WriteError(w, r, err)
	}
}

// deadLetterJSON is a dead letter as the contract shows it.
func deadLetterJSON(d timers.DeadLetter) adminapi.DeadLetter {
	return adminapi.DeadLetter{Timer: timerJSON(d.Timer), DiedAt: d.DiedAt.UTC()}
}
