package workflows

import "context"

// A runner held step by step. A test kit's stepping
// (faulthook.WorkflowSteps, handed to the service's Runners) holds each
// step run of every instance until the test lets it run, so that a test
// sees the workflow between two of its steps: the transition into the
// step is committed, the step has not started. Commands, timers and
// operators still move a held instance; the runner then reads it again
// and holds its new step. Once a run's outcome is committed (and the
// timer of the pause it made armed), the runner tells the test kit, and
// holds the next step.

// holdStep waits until the test kit's stepping, if any, lets run at of
// id start; kicked: the instance was woken meanwhile (read it again),
// stopped: ctx ended.
func (r *Running[S]) holdStep(ctx context.Context, id string, at attempt, kick <-chan struct{}) waitEnd {
	if r.hooks.steps == nil {
		return waited
	}
	select {
	case <-r.hooks.steps.StepGate(r.point(pointBeforeStep, id, at)):
		return waited
	case <-kick:
		return kicked
	case <-ctx.Done():
		return stopped
	}
}

// stepSettled tells the test kit's stepping, if any, that the runner is
// done with the outcome of run at of id (none when nil).
func (r *Running[S]) stepSettled(id string, at *attempt) {
	if r.hooks.steps != nil && at != nil {
		r.hooks.steps.StepSettled(r.point(pointAfterStep, id, *at))
	}
}
