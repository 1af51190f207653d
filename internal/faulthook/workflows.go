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
