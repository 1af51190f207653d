package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trellis-go/trellis/components"
)

// Instance is a workflow instance as stored: its state and where it
// stands.
type Instance[S any] struct {
	ID     string
	State  S
	Status Status
	// Suspended: an operator suspended its running step (Status is
	// paused).
	Suspended bool
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
	inst, err := r.t.instance(id, rec)
	if err != nil {
		return Instance[S]{}, err
	}
	return inst, nil
}

// Record is an instance as an operator sees it: as stored, its state and
// its step's input as JSON.
type Record struct {
	Type   string
	ID     string
	Status Status
	// Suspended: an operator suspended its running step (Status is
	// paused).
	Suspended bool
	// Step is its current step (a failed instance keeps the step it
	// failed at), Input that step's input, Attempt the failed runs of it.
	Step       string
	Input      json.RawMessage
	Attempt    int
	Transition uint64
	NotBefore  time.Time
	PauseUntil time.Time
	Deadline   time.Time
	Error      string
	State      json.RawMessage
	History    []Entry
}

// public is rec as a Record.
func (rec record) public(componentID, id string) Record {
	return Record{Type: componentID, ID: id, Status: rec.Status, Suspended: rec.Suspended, Step: rec.Step, Input: rec.Input,
		Attempt: rec.Attempt, Transition: rec.Transition, NotBefore: rec.NotBefore, PauseUntil: rec.PauseUntil,
		Deadline: rec.Deadline, Error: rec.Error, State: rec.State, History: rec.History}
}

// Inspect reads instance id from the owner of its shard, as stored.
func (r *Running[S]) Inspect(ctx context.Context, id string) (Record, error) {
	rec, err := r.get.Invoke(ctx, r.host.Entities.Client, id, components.Done{})
	if err != nil {
		return Record{}, fmt.Errorf("get workflow %s/%s: %w", r.t.id, id, err)
	}
	return rec.public(r.t.id, id), nil
}

// List reads the instances of every shard from the store (one listing
// of the type's states: eachRecord), those of status, or every one when
// status is "", sorted by id; more reports that there were more than
// limit. An instance that has not started (a command changed its state
// without moving it) is not listed; a record that does not decode is
// listed as failed, its Error saying why.
func (r *Running[S]) List(ctx context.Context, status Status, limit int) ([]Record, bool, error) {
	var out []Record
	err := r.eachRecord(ctx, allShards, func(_ int, id string, rec record) error {
		if rec.Status != StatusNotStarted && (status == "" || rec.Status == status) {
			out = append(out, rec.public(r.t.id, id))
		}
		return nil
	}, func(id string, err error) error {
		// Listed as failed, with why: one record that does not decode
		// hides none of the others.
		if status == "" || status == StatusFailed {
			out = append(out, Record{Type: r.t.id, ID: id, Status: StatusFailed, Error: err.Error()})
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list workflows %s: %w", r.t.id, err)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}
