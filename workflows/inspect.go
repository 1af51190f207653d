package workflows

import (
	"context"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
)

// Instance is a workflow instance as stored: its state and where it
// stands.
type Instance[S any] struct {
	ID     string
	State  S
	Status Status
	// Step is the step it runs and Attempt the failed runs of it so far;
	// Transition counts its moves.
	Step       string
	Attempt    int
	Transition uint64
	// NotBefore is when a retry of its step may run; PauseUntil when its
	// pause lapses; Deadline when it times out (each zero when none).
	NotBefore  time.Time
	PauseUntil time.Time
	Deadline   time.Time
	// Error is why its last attempt failed, or why it did.
	Error string
	// History is its last transitions, oldest first.
	History []Entry
}

// Get reads instance id (StatusNotStarted when it has no record), from
// the owner of its shard.
func (r *Running[S]) Get(ctx context.Context, id string) (Instance[S], error) {
	rec, err := r.get.Invoke(ctx, r.host.Entities.Client, id, components.Done{})
	if err != nil {
		return Instance[S]{}, fmt.Errorf("get workflow %s/%s: %w", r.t.id, id, err)
	}
	state, err := r.t.decode(id, rec)
	if err != nil {
		return Instance[S]{}, err
	}
	return Instance[S]{ID: id, State: state, Status: rec.Status, Step: rec.Step, Attempt: rec.Attempt, Transition: rec.Transition,
		NotBefore: rec.NotBefore, PauseUntil: rec.PauseUntil, Deadline: rec.Deadline, Error: rec.Error, History: rec.History}, nil
}
