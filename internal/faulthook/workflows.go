package faulthook

// WorkflowPoint is a crash point of a workflow's run: a place between two
// of its commit boundaries where a crash leaves the store as it is and
// the step that ran, if any, uncommitted.
type WorkflowPoint struct {
	// Workflow and ID name the instance.
	Workflow, ID string
	// Where is the point: "before step" (the transition into Step is
	// committed, the step has not run), "after step" (its handler
	// returned, its calls were made, its outcome is not committed) or
	// "before the timer" (the pause is committed, its timer not armed).
	Where string
	// Step is the step that runs or is about to ("" for a pause), under
	// Transition, at Attempt (from 1).
	Step       string
	Transition uint64
	Attempt    int
}

// WorkflowCrashes decides where an instance's workflow runners crash.
type WorkflowCrashes interface {
	// CrashWorkflow is called by a runner at every crash point it passes;
	// true: the runner crashes there (it drops what it holds in memory,
	// commits nothing more, and resumes from the store).
	CrashWorkflow(p WorkflowPoint) bool
}

// GiveWorkflowCrashes hands c to runners (a *workflows.Runners), whose
// workflows then ask c at each crash point. Package workflows sets it:
// this package cannot import it.
var GiveWorkflowCrashes func(runners any, c WorkflowCrashes)

// WorkflowSteps hold every step run of an instance's workflows until a
// test lets it run, one at a time (trellistest.StepWorkflow).
type WorkflowSteps interface {
	// StepGate is called by a runner when the step run p ("before step")
	// is due. The run starts once the runner receives from the channel,
	// one receive per run. While it waits, commands, timers and operators
	// still move the instance: the runner then reads it again and asks
	// anew; a stop or a shard's hand-over ends the wait, and the run.
	StepGate(p WorkflowPoint) <-chan struct{}
	// StepSettled is called once the runner is done with the outcome of
	// the run p ("after step"): it is committed and, when it paused the
	// workflow, the pause's timer is armed.
	StepSettled(p WorkflowPoint)
}

// WorkflowStepping is what fault points implement when they may hold
// the workflows' steps: WorkflowSteps are those, nil when the steps run
// freely.
type WorkflowStepping interface {
	WorkflowSteps() WorkflowSteps
}

// GiveWorkflowSteps hands s to runners (a *workflows.Runners), whose
// workflows then run each step only once s lets them. Package workflows
// sets it: this package cannot import it.
var GiveWorkflowSteps func(runners any, s WorkflowSteps)
