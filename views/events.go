package views

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/entities"
)

// EventSource is an event-sourced entity type (eventsourced.Type) as a
// view's source: its component id, and how it reads an event from its
// journal name and data (upcasters included).
type EventSource interface {
	ComponentID() string
	DecodeEvent(name string, data []byte) (any, error)
}

// EntityEvent is one event of an event-sourced entity as the updater of
// a view over its events gets it, with the entity's row as the view
// holds it before the event.
type EntityEvent[R any] struct {
	EntityID string
	// Seq is the event's number in the entity's journal (for a deletion,
	// the last event's).
	Seq uint64
	// Name is the event's name in the journal; Event the event, as one of
	// the entity type's event types. Both are empty for a deletion.
	Name  string
	Event any
	// Deleted is true for the entity's deletion.
	Deleted bool
	// At is when the event was recorded; zero for an event read from the
	// journal while the view is built.
	At time.Time
	// Row is the entity's row before the event; nil when it has none.
	Row *R
}

// DefineEvents defines a view named name over the events of an
// event-sourced entity type: each entity has at most one row, which
// update folds each event of the entity into, in the order of the
// journal (Akka's updater of a view over events: the event and the row
// so far). update must be a pure function of its argument: a view that
// is new (or behind the change log's bound) is built by folding each
// entity's journal, the events kept there, from no row.
//
// The events come from the shard's change log, written with the journal
// in one step, so the view sees an event when Define's views see a
// change; the row before the event is read with the batch.
func DefineEvents[R any](name string, source EventSource, update func(EntityEvent[R]) Update[R]) *View[EntityEvent[R], R] {
	v := define[EntityEvent[R], R](name, "", nil, nil)
	if source == nil || update == nil {
		return v
	}
	v.def.entityType = source.ComponentID()
	v.def.events = true
	v.fold = func(c entities.Change, row []byte) (Update[R], error) {
		e := EntityEvent[R]{EntityID: c.EntityID, Seq: c.Revision, Deleted: c.Deleted, At: c.At}
		if !c.Deleted {
			var env struct {
				Name string          `json:"name"`
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(c.Data, &env); err != nil || env.Name == "" {
				return Update[R]{}, fmt.Errorf("event %d of %s: not an event of the journal", c.Revision, c.EntityID)
			}
			event, err := source.DecodeEvent(env.Name, env.Data)
			if err != nil {
				return Update[R]{}, fmt.Errorf("event %d of %s: %w", c.Revision, c.EntityID, err)
			}
			e.Name, e.Event = env.Name, event
		}
		if row != nil {
			e.Row = new(R)
			if err := json.Unmarshal(row, e.Row); err != nil {
				return Update[R]{}, fmt.Errorf("the row of %s: %w", c.EntityID, err)
			}
		}
		return update(e), nil
	}
	return v
}

// errNoJournal is why a view over events cannot be built on a store
// that keeps no journals.
var errNoJournal = errors.New("the store keeps no journals of event-sourced entities")
