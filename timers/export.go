package timers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
)

// The kinds of an [ExportRecord].
const (
	KindTimer     = "timer"     // an active single timer
	KindRecurring = "recurring" // an active recurring timer
	KindDead      = "dead"      // a dead letter
)

// ExportRecord is one timer as [Scheduler.Export] writes it and
// [Scheduler.Import] reads it: one JSON object per line. Attempts,
// LastError and LastAttemptAt are informational for active timers (an
// import starts them afresh, with a new generation) and kept for dead
// letters.
type ExportRecord struct {
	Kind          string          `json:"kind"`
	Name          string          `json:"name"`
	ComponentID   string          `json:"componentId"`
	Method        string          `json:"method"`
	EntityID      string          `json:"entityId,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	DueAt         time.Time       `json:"dueAt"`
	CreatedAt     time.Time       `json:"createdAt,omitzero"`
	MaxRetries    int             `json:"maxRetries,omitempty"`
	Attempts      int             `json:"attempts,omitempty"`
	LastError     string          `json:"lastError,omitempty"`
	LastAttemptAt time.Time       `json:"lastAttemptAt,omitzero"`
	// Schedule, Run and Paused are a recurring timer's (see Recurrence).
	Schedule *Schedule `json:"schedule,omitempty"`
	Run      time.Time `json:"run,omitzero"`
	Paused   bool      `json:"paused,omitempty"`
	// DiedAt is a dead letter's time of death.
	DiedAt time.Time `json:"diedAt,omitzero"`
}

// exportOf is t as an export record of kind timer or recurring.
func exportOf(t Timer) ExportRecord {
	r := ExportRecord{
		Kind: KindTimer, Name: t.Name, ComponentID: t.Call.ComponentID, Method: t.Call.Method, EntityID: t.Call.EntityID,
		Payload: t.Call.Argument, DueAt: t.DueAt.UTC(), CreatedAt: t.CreatedAt.UTC(), MaxRetries: t.MaxRetries,
		Attempts: t.Attempts, LastError: t.LastError, LastAttemptAt: t.LastAttemptAt.UTC(),
	}
	if rc := t.Recurring; rc != nil {
		sc := rc.Schedule
		r.Kind, r.Schedule, r.Run, r.Paused = KindRecurring, &sc, rc.Run.UTC(), rc.Paused
	}
	return r
}

// call is the record's deferred call.
func (r ExportRecord) call() components.DeferredCall {
	return components.DeferredCall{ComponentID: r.ComponentID, Method: r.Method, EntityID: r.EntityID, Argument: r.Payload}
}

// exportPage is how many timers Export reads per store call.
const exportPage = MaxListLimit

// Export calls emit with every timer of the store: the active ones
// (single and recurring) in run order, then the dead letters by time of
// death. It is a walk with List's guarantees, not a snapshot: a timer
// that runs, fails or is replaced during the walk may be left out or
// appear twice. It stops at emit's first error.
func (s *Scheduler) Export(ctx context.Context, emit func(ExportRecord) error) error {
	q := ListQuery{Limit: exportPage}
	for {
		p, err := s.List(ctx, q)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for _, t := range p.Timers {
			if err := emit(exportOf(t)); err != nil {
				return fmt.Errorf("export: %w", err)
			}
		}
		if q.Cursor = p.NextCursor; q.Cursor == "" {
			break
		}
	}
	dq := DeadLetterQuery{Limit: exportPage}
	for {
		p, err := s.ListDeadLetters(ctx, dq)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for _, d := range p.DeadLetters {
			r := exportOf(d.Timer)
			r.Kind, r.DiedAt = KindDead, d.DiedAt.UTC()
			if err := emit(r); err != nil {
				return fmt.Errorf("export: %w", err)
			}
		}
		if dq.Cursor = p.NextCursor; dq.Cursor == "" {
			return nil
		}
	}
}

// ExportLegacy calls emit with every timer a Redis store holds in the key
// layout of the versions before the 16 partitions (<prefix>:timers:data
// and …:due, which this version does not read), as single timers of the
// export's form, for Import to carry them over. It reads and changes
// nothing else; once imported, delete those keys. A memory store has no
// such keys: ErrInvalid.
func (s *Scheduler) ExportLegacy(ctx context.Context, emit func(ExportRecord) error) error {
	rs, ok := s.store.(*RedisStore)
	if !ok {
		return fmt.Errorf("export legacy timers: %w: only a Redis store has the legacy layout", ErrInvalid)
	}
	if err := rs.scanLegacy(ctx, func(t Timer) error { return emit(exportOf(t)) }); err != nil {
		return fmt.Errorf("export legacy timers: %w", err)
	}
	return nil
}
