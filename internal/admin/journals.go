package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/entities"
)

// errNoJournals answers the journal routes when the service's store keeps
// no journals (every store of package entities does).
var errNoJournals = errors.New("the service's store keeps no journals of event-sourced entities")

// GetEventSourcedEntity answers GET /admin/eventsourced/{entityType}/{entityId}:
// the journal's head (seq 0 when there is no journal).
func (a *server) GetEventSourcedEntity(w http.ResponseWriter, r *http.Request, entityType, entityID string) {
	if a.journals == nil {
		api.WriteError(w, r, errNoJournals)
		return
	}
	head, _, err := a.journals.ReadJournal(r.Context(), entityType, entityID)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	out := adminapi.JournalHead{EntityType: entityType, EntityId: entityID, Seq: int(head.Seq), Deleted: head.Deleted}
	if s := head.Snapshot; s != nil {
		out.Snapshot = &adminapi.JournalSnapshot{Seq: int(s.Seq), At: s.At.UTC(), State: s.Data}
	}
	if err := a.checkLoad(r.Context(), entityType, entityID); err != nil {
		out.LoadError = err.Error()
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// ListEventSourcedEvents answers GET /admin/eventsourced/{entityType}/{entityId}/events:
// a page of the events kept after event after.
func (a *server) ListEventSourcedEvents(w http.ResponseWriter, r *http.Request, entityType, entityID string,
	params adminapi.ListEventSourcedEventsParams) {
	if a.journals == nil {
		api.WriteError(w, r, errNoJournals)
		return
	}
	after, limit := 0, 100
	if params.After != nil {
		if after = *params.After; after < 0 {
			api.WriteError(w, r, api.InvalidField("after", "must be 0 or more"))
			return
		}
	}
	if params.Limit != nil {
		if limit = *params.Limit; limit < 1 || limit > 1000 {
			api.WriteError(w, r, api.InvalidField("limit", "must be from 1 to 1,000"))
			return
		}
	}
	events, err := a.journals.Events(r.Context(), entityType, entityID, uint64(after), limit+1)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	out := adminapi.JournalPage{Events: make([]adminapi.JournalEvent, 0, min(len(events), limit))}
	for i, e := range events {
		if i == limit {
			next := int(events[limit-1].Seq)
			out.Next = &next
			break
		}
		out.Events = append(out.Events, adminapi.JournalEvent{Seq: int(e.Seq), Name: e.Name, At: e.At.UTC(), Data: e.Data})
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// loadChecker is a started event-sourced entity type
// (eventsourced.Running).
type loadChecker interface {
	CheckLoad(ctx context.Context, entityID string) error
}

// checkLoad is why entityType's entity entityID does not load, when the
// type is started here; nil otherwise.
func (a *server) checkLoad(ctx context.Context, entityType, entityID string) error {
	if a.registry == nil {
		return nil
	}
	c, err := a.registry.Lookup(entityType)
	if err != nil {
		return nil
	}
	if lc, ok := c.(loadChecker); ok {
		return lc.CheckLoad(ctx, entityID)
	}
	return nil
}

// journalsOf is the store's journals, nil when it keeps none.
func journalsOf(s any) entities.JournalStore {
	j, _ := s.(entities.JournalStore)
	return j
}
