package admin

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/consumers"
)

// ListConsumers answers GET /admin/consumers: each consumer, its lag on
// this instance's shards and how many dead letters it holds.
func (a *server) ListConsumers(w http.ResponseWriter, r *http.Request) {
	out := []adminapi.Consumer{}
	if a.consumers == nil {
		api.WriteJSON(w, r, http.StatusOK, out)
		return
	}
	lags := a.consumers.Lag()
	for _, id := range slices.Sorted(slices.Values(a.consumers.Consumers())) {
		dead, err := a.consumers.DeadLetters(r.Context(), id)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		l := lags[id]
		c := adminapi.Consumer{Id: id, LagChanges: int(l.Changes), DeadLetters: len(dead)}
		if !l.Oldest.IsZero() {
			c.LagSeconds = max(time.Since(l.Oldest).Seconds(), 0)
		}
		out = append(out, c)
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// ListConsumerDeadLetters answers GET /admin/consumers/{consumer}/dead-letters.
func (a *server) ListConsumerDeadLetters(w http.ResponseWriter, r *http.Request, consumer string) {
	if !a.knows(w, r, consumer) {
		return
	}
	dead, err := a.consumers.DeadLetters(r.Context(), consumer)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	out := make([]adminapi.ConsumerDeadLetter, 0, len(dead))
	for _, d := range dead {
		out = append(out, adminapi.ConsumerDeadLetter{Consumer: d.Consumer, EntityType: d.EntityType, EntityId: d.EntityID,
			Revision: int(d.Revision), Deleted: d.Deleted, State: d.State, Error: d.Error, Attempts: d.Attempts, At: d.At})
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// DropConsumerDeadLetter answers DELETE /admin/consumers/{consumer}/dead-letters/{entityId}.
func (a *server) DropConsumerDeadLetter(w http.ResponseWriter, r *http.Request, consumer, entityID string) {
	if !a.knows(w, r, consumer) {
		return
	}
	a.deadLetterDone(w, r, a.consumers.DropDeadLetter(r.Context(), consumer, entityID))
}

// RetryConsumerDeadLetter answers POST /admin/consumers/{consumer}/dead-letters/{entityId}/retry.
func (a *server) RetryConsumerDeadLetter(w http.ResponseWriter, r *http.Request, consumer, entityID string) {
	if !a.knows(w, r, consumer) {
		return
	}
	a.deadLetterDone(w, r, a.consumers.RetryDeadLetter(r.Context(), consumer, entityID))
}

// knows answers 404 unless consumer runs here.
func (a *server) knows(w http.ResponseWriter, r *http.Request, consumer string) bool {
	if a.consumers == nil || !a.consumers.Has(consumer) {
		api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("no consumer is called %q", consumer))
		return false
	}
	return true
}

// deadLetterDone answers a drop or a retry: 204, 404 when there was no
// such dead letter, 409 when the handler failed again.
func (a *server) deadLetterDone(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, consumers.ErrNoDeadLetter):
		api.WriteProblem(w, r, http.StatusNotFound, err.Error())
	case errors.Is(err, consumers.ErrHandlerFailed):
		api.WriteProblem(w, r, http.StatusConflict, err.Error())
	default:
		api.WriteError(w, r, err)
	}
}
