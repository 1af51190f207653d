package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Status is where a workflow stands.
type Status string

// The statuses of a workflow.
const (
	// StatusNotStarted: no command has moved the workflow to a step yet.
	StatusNotStarted Status = ""
	// StatusRunning: its current step runs (or waits for its retry) on the
	// owner of its shard.
	StatusRunning Status = "running"
	// StatusPaused: it waits for a command, or for its pause to lapse.
	StatusPaused Status = "paused"
	// StatusEnded: a step or a command ended it. Nothing moves it any more.
	StatusEnded Status = "ended"
	// StatusFailed: a step ran out of retries with no failover step, its
	// workflow timed out with none, or it is stored at a step the code no
	// longer has. Nothing moves it any more.
	StatusFailed Status = "failed"
)

// over reports whether nothing moves a workflow of status s any more.
func (s Status) over() bool { return s == StatusEnded || s == StatusFailed }

// record is a workflow instance as stored: the state of the internal
// entity of the workflow's type. One write of it is one transition, under
// the shard's fence, with its change in the shard's log.
type record struct {
	// State is the workflow's state, as JSON.
	State json.RawMessage `json:"state,omitempty"`
	// Status is where it stands.
	Status Status `json:"status,omitempty"`
	// Run tells this instance from an earlier one of the same id (ended
	// and deleted): set when it first moves, it is part of its steps'
	// idempotency keys.
	Run string `json:"run,omitempty"`
	// Step is the step it runs (Running) and Input that step's input.
	Step  string          `json:"step,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// Attempt counts the failed runs of the current step.
	Attempt int `json:"attempt,omitempty"`
	// Transition counts the moves to a step, a pause or an end (and an
	// operator's suspend, resume or retry); a step's outcome commits only
	// while the transition is unchanged.
	Transition uint64 `json:"transition,omitempty"`
	// Entered is the transition that entered the current step: its runs'
	// key. An operator's suspend, resume or retry keeps it, so the step's
	// entity commands stay applied once across them (0 in records written
	// before it was kept: Transition is the key then).
	Entered uint64 `json:"entered,omitempty"`
	// EnteredAt is when the current step was entered (the runner's clock;
	// zero in records written before it was kept): its entity commands'
	// answers were recorded after it, so they are kept at least until
	// EnteredAt plus the entities' key retention (staleKeys).
	EnteredAt time.Time `json:"enteredAt,omitzero"`
	// Suspended: an operator suspended the running step (the status is
	// paused); a resume runs it again under the same key.
	Suspended bool `json:"suspended,omitempty"`
	// NotBefore is when the current step's next attempt may run (a retry
	// waits out its backoff).
	NotBefore time.Time `json:"notBefore,omitzero"`
	// PauseUntil is when a pause lapses, and OnLapse the step it goes to
	// then (none: the workflow stays paused).
	PauseUntil time.Time `json:"pauseUntil,omitzero"`
	OnLapse    *Target   `json:"onLapse,omitempty"`
	// Deadline is when the whole workflow times out (zero: never).
	Deadline time.Time `json:"deadline,omitzero"`
	// Error is why the last attempt failed, or why the workflow did.
	Error string `json:"error,omitempty"`
	// Trace is the trace context of the command that started the
	// workflow (tracing.CaptureForLink: "" unless it was sampled); each
	// step's span links to it.
	Trace string `json:"trace,omitempty"`
	// PausedBy is the trace context of the step run that paused it (as
	// Trace; "" when a command paused it): its pause's timer is created
	// under that run's span.
	PausedBy string `json:"pausedBy,omitempty"`
	// History is the last transitions, oldest first (at most
	// historyLength: a record's size does not grow as a workflow runs on).
	History []Entry `json:"history,omitempty"`
}

// historyLength bounds a record's History.
const historyLength = 16

// Entry is one outcome in a workflow's history: a step's attempt, or a
// command or timer that moved it.
type Entry struct {
	// Transition is the transition the step (or the move) was made under.
	Transition uint64 `json:"transition"`
	// Step is the step that ran; "" for a command or a lapsed pause.
	Step string `json:"step,omitempty"`
	// Attempt is the step's attempt, from 1.
	Attempt int `json:"attempt,omitempty"`
	// Outcome says what happened: "to withdraw", "paused", "ended",
	// "failed", "retry", "timed out", "deleted".
	Outcome string `json:"outcome"`
	// Error is the attempt's error, when it failed.
	Error string `json:"error,omitempty"`
	// Started is when the attempt started; At when its outcome was
	// committed.
	Started time.Time `json:"started,omitzero"`
	At      time.Time `json:"at"`
}

// Target is a step and its input, as stored.
type Target struct {
	Step  string          `json:"step"`
	Input json.RawMessage `json:"input,omitempty"`
}

// moveKind is what a decision does to the workflow after its state.
type moveKind uint8

const (
	stay       moveKind = iota // only the state (a command's effect)
	transition                 // to Decision.Step with Decision.Input
	pause                      // paused, with an optional lapse
	end                        // ended
	endDelete                  // ended and deleted from the store
)

// decision is an effect in stored form: what a command or a step decided,
// its state and input encoded. It travels in a commit's argument, so its
// fields are JSON.
type decision struct {
	Update bool            `json:"update,omitempty"`
	State  json.RawMessage `json:"state,omitempty"`
	Move   moveKind        `json:"move,omitempty"`
	Step   string          `json:"step,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	// PauseFor is how long a pause lasts before it lapses to Lapse (zero:
	// until a command moves it).
	PauseFor time.Duration `json:"pauseFor,omitempty"`
	Lapse    *Target       `json:"lapse,omitempty"`
}

// move describes a move for the history.
func (d decision) outcome() string {
	switch d.Move {
	case transition:
		return "to " + d.Step
	case pause:
		return "paused"
	case end:
		return "ended"
	case endDelete:
		return "deleted"
	}
	return "updated"
}

// encodeMove makes the stored form of a move: the state (when updated) and
// the input encoded.
func encodeMove[S any](update bool, state S, m move) (decision, error) {
	d := decision{Update: update, Move: m.kind, Step: m.step, PauseFor: m.pauseFor}
	if update {
		b, err := json.Marshal(state)
		if err != nil {
			return decision{}, fmt.Errorf("encode the state: %w", err)
		}
		d.State = b
	}
	if m.kind == transition {
		b, err := encodeInput(m.input)
		if err != nil {
			return decision{}, fmt.Errorf("encode the input of step %q: %w", m.step, err)
		}
		d.Input = b
	}
	if m.lapse != "" {
		b, err := encodeInput(m.lapseInput)
		if err != nil {
			return decision{}, fmt.Errorf("encode the input of step %q: %w", m.lapse, err)
		}
		d.Lapse = &Target{Step: m.lapse, Input: b}
	}
	return d, nil
}

// nullInput is a step's input when it is given none (nil). Shared, it is
// only ever read.
var nullInput = json.RawMessage("null")

// encodeInput is the stored form of a step's input.
func encodeInput(input any) (json.RawMessage, error) {
	if input == nil {
		return nullInput, nil
	}
	return json.Marshal(input)
}

// move is a move as an effect holds it, before it is encoded.
type move struct {
	kind       moveKind
	step       string
	input      any
	pauseFor   time.Duration
	lapse      string
	lapseInput any
}

// enter moves rec into step with input at time at: a new transition, a
// fresh attempt.
func (rec *record) enter(step string, input json.RawMessage, at time.Time) {
	rec.Status, rec.Step, rec.Input, rec.EnteredAt = StatusRunning, step, input, at
	rec.Attempt, rec.NotBefore, rec.Error = 0, time.Time{}, ""
	rec.PauseUntil, rec.OnLapse = time.Time{}, nil
	rec.Suspended, rec.PausedBy = false, ""
	rec.Transition++
	rec.Entered = rec.Transition
}

// entered is the transition that entered rec's step: its runs' key.
func (rec *record) entered() uint64 {
	if rec.Entered != 0 {
		return rec.Entered
	}
	return rec.Transition
}

// leave moves rec out of its step to status s (paused, ended, failed).
func (rec *record) leave(s Status) {
	rec.PausedBy = ""
	rec.Status, rec.Step, rec.Input = s, "", nil
	rec.Attempt, rec.NotBefore = 0, time.Time{}
	rec.PauseUntil, rec.OnLapse = time.Time{}, nil
	rec.Suspended, rec.Entered = false, 0
	rec.Transition++
}

// fail moves rec to StatusFailed with why, keeping its step and input:
// an operator may retry the step (under its key) or skip to another.
func (rec *record) fail(why string) {
	step, input, entered := rec.Step, rec.Input, rec.entered()
	rec.leave(StatusFailed)
	rec.Step, rec.Input, rec.Error = step, input, why
	if step != "" {
		rec.Entered = entered
	}
}

// inputBytes is what MaxRecordBytes bounds: the state and the inputs of
// the step the record is at and of the step its pause lapses to.
func (rec *record) inputBytes() int {
	n := len(rec.State) + len(rec.Input)
	if rec.OnLapse != nil {
		n += len(rec.OnLapse.Input)
	}
	return n
}

// note adds e to the history, dropping the oldest past historyLength,
// in a new slice: the one rec had may be shared with the record its
// entity holds (see detached).
func (rec *record) note(e Entry) {
	keep := rec.History[max(0, len(rec.History)-historyLength+1):]
	rec.History = append(append(make([]Entry, 0, len(keep)+1), keep...), e)
}

// withoutHistory is rec without its History: a commit's reply, which the
// runner drives the workflow on, so it stays small however long the
// history is. It shares the rest with rec (the runner only reads it).
func (rec record) withoutHistory() record {
	rec.History = nil
	return rec
}

// detached is a copy of rec that shares nothing with it: the record's
// entity holds its state decoded (entities.Type.KeepDecoded), and its
// handlers change nothing in place, but a reply that leaves the workflow
// (Inspect, Get, an operator's action) is the caller's to change.
func (rec record) detached() record {
	rec.State, rec.Input = bytes.Clone(rec.State), bytes.Clone(rec.Input)
	if rec.OnLapse != nil {
		lapse := Target{Step: rec.OnLapse.Step, Input: bytes.Clone(rec.OnLapse.Input)}
		rec.OnLapse = &lapse
	}
	rec.History = slices.Clone(rec.History)
	return rec
}

// runsAt is when a running workflow's step runs next: after its retry's
// backoff, or at its deadline if that comes first (the run then times the
// workflow out).
func (rec *record) runsAt() time.Time {
	if !rec.Deadline.IsZero() && rec.Deadline.Before(rec.NotBefore) {
		return rec.Deadline
	}
	return rec.NotBefore
}

// wakeAt is when a paused workflow must be woken (its pause lapses or it
// times out), zero when nothing wakes it.
func (rec *record) wakeAt() time.Time {
	if rec.Status != StatusPaused || rec.Suspended {
		return time.Time{}
	}
	at := rec.PauseUntil
	if !rec.Deadline.IsZero() && (at.IsZero() || rec.Deadline.Before(at)) {
		at = rec.Deadline
	}
	return at
}
