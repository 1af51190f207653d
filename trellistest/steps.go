package trellistest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/faulthook"
	"github.com/trellis-go/trellis/workflows"
)

// Stepping through workflows. On a service started WithSteppedWorkflows,
// the runner of every workflow instance holds before each step run — the
// transition into the step committed, the step not started — until the
// test lets it run with StepWorkflow. The hold sits in the real runtime
// (internal/faulthook, as the crash points do), so what a test steps
// through is what a service runs: the same store, records, retries,
// timers and history.

// WithSteppedWorkflows holds every step run of the service's workflows
// until the test lets it run with StepWorkflow, one run at a time.
// Commands, operators and timers still move a held instance (its runner
// then holds the step it moved to), and the service stops cleanly while
// steps are held. WaitWorkflow still reads an instance, but a held one
// does not move on by itself: step it to the status wanted.
func WithSteppedWorkflows() Option { return func(o *options) { o.stepped = true } }

// StepWorkflow lets the next step run of workflow instance id of wf run
// — one attempt: a failed one commits its retry's wait and no more — on
// ts, a service started WithSteppedWorkflows, and returns the instance
// once that run's outcome is committed (and the timer of a pause it made
// is armed): its state, status, step, attempts and history, as the test
// reads them between two steps. It fails the test, at once, when the
// instance has no step to run now: not started, paused, ended or failed,
// or waiting for a retry that is not due on the fake clock (move the
// clock to its NotBefore first: StepWorkflow moves no clock). It fails
// the test when the run takes more than limit of real time to settle.
//
// A test steps an instance on the service that serves its shard (the
// only one, on the embedded store), one StepWorkflow at a time.
func StepWorkflow[S any](t testing.TB, ts *Service, wf *workflows.Running[S], id string, limit time.Duration) workflows.Instance[S] {
	t.Helper()
	name := wf.ComponentID() + "/" + id
	if ts.steps == nil {
		t.Fatalf("StepWorkflow %s: the service runs its workflows freely: start it WithSteppedWorkflows()", name)
	}
	in, err := wf.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("StepWorkflow %s: %v", name, err)
	}
	if why := noStepToRun(in, ts.Clock.Now()); why != "" {
		t.Fatalf("StepWorkflow: workflow %s %s", name, why)
	}
	settled, ok := ts.steps.allow(wf.ComponentID(), id)
	if !ok {
		t.Fatalf("StepWorkflow %s: a step run let run earlier has not settled: step one run at a time", name)
	}
	wait := time.NewTimer(limit)
	defer wait.Stop()
	select {
	case <-settled:
	case <-wait.C:
		now, err := wf.Get(context.Background(), id)
		t.Fatalf("StepWorkflow %s: step %q (attempt %d) did not settle within %v: the workflow stands %s at step %q (%v)",
			name, in.Step, in.Attempt+1, limit, statusName(now.Status), now.Step, err)
	}
	if in, err = wf.Get(context.Background(), id); err != nil {
		t.Fatalf("StepWorkflow %s: %v", name, err)
	}
	return in
}

// noStepToRun says why instance in has no step run to let run at now
// (a sentence after the workflow's name), "" when it has one.
func noStepToRun[S any](in workflows.Instance[S], now time.Time) string {
	switch in.Status {
	case workflows.StatusNotStarted:
		return "has not started: it has no step to run"
	case workflows.StatusEnded:
		return "has ended: it has no step left to run"
	case workflows.StatusFailed:
		return fmt.Sprintf("has failed at step %q (%s): it has no step left to run", in.Step, in.Error)
	case workflows.StatusPaused:
		if in.Suspended {
			return fmt.Sprintf("is suspended at step %q: no step runs until an operator resumes it", in.Step)
		}
		why := "is paused: no step runs until a command moves it"
		if !in.PauseUntil.IsZero() {
			why += fmt.Sprintf(", or its pause lapses %v from the clock's now (ts.AdvanceTimers)", in.PauseUntil.Sub(now))
		}
		return why
	}
	due := in.NotBefore
	if !in.Deadline.IsZero() && in.Deadline.Before(due) {
		due = in.Deadline // it times out then, without waiting for the retry
	}
	if due.After(now) {
		return fmt.Sprintf("waits to retry step %q (attempt %d) %v from the clock's now: move the clock there first (ts.Clock.Advance)",
			in.Step, in.Attempt+1, due.Sub(now))
	}
	return ""
}

// stepper holds the service's workflow step runs (faulthook.WorkflowSteps)
// until StepWorkflow lets one run: each instance's gate holds at most one
// pass, which the next run of the instance takes as it starts.
type stepper struct {
	mu    sync.Mutex
	gates map[stepKey]*stepGate
}

// stepKey names an instance: its workflow's component id, and its id.
type stepKey struct{ workflow, id string }

// stepGate is an instance's gate: pass holds the pass of its next run
// (capacity 1), settled is closed once a run's outcome settles, then
// replaced.
type stepGate struct {
	pass    chan struct{}
	settled chan struct{}
}

var _ faulthook.WorkflowSteps = (*stepper)(nil)

// gate is the gate of workflow's instance id, made on first use.
func (s *stepper) gate(workflow, id string) *stepGate {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := stepKey{workflow, id}
	g, ok := s.gates[k]
	if !ok {
		if s.gates == nil {
			s.gates = make(map[stepKey]*stepGate)
		}
		g = &stepGate{pass: make(chan struct{}, 1), settled: make(chan struct{})}
		s.gates[k] = g
	}
	return g
}

// StepGate is the channel the run p takes its pass from.
func (s *stepper) StepGate(p faulthook.WorkflowPoint) <-chan struct{} {
	return s.gate(p.Workflow, p.ID).pass
}

// StepSettled tells the StepWorkflow that let run p that it settled.
func (s *stepper) StepSettled(p faulthook.WorkflowPoint) {
	g := s.gate(p.Workflow, p.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	close(g.settled)
	g.settled = make(chan struct{})
}

// allow gives the next run of workflow's instance id its pass, and
// returns a channel closed once that run settles; false: a pass given
// earlier was not taken yet.
func (s *stepper) allow(workflow, id string) (<-chan struct{}, bool) {
	g := s.gate(workflow, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case g.pass <- struct{}{}:
		return g.settled, true
	default:
		return nil, false
	}
}
