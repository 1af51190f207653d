package faults

import "github.com/trellis-go/trellis/internal/faulthook"

// CrashWorkflowsAt has the instance's workflow runners ask crash at each
// crash point they pass, and crash where it says so (see
// faulthook.WorkflowCrashes); nil: they never crash. Set it before the
// instance starts its workflows.
func (p *Points) CrashWorkflowsAt(crash func(faulthook.WorkflowPoint) bool) {
	p.mu.Lock()
	p.crashWorkflow = crash
	p.mu.Unlock()
}

// CrashWorkflow is what CrashWorkflowsAt set says about point wp.
func (p *Points) CrashWorkflow(wp faulthook.WorkflowPoint) bool {
	p.mu.Lock()
	crash := p.crashWorkflow
	p.mu.Unlock()
	return crash != nil && crash(wp)
}

// HoldWorkflowSteps has the instance's workflow runners run each step
// only once steps let it (see faulthook.WorkflowSteps); nil: they run
// freely. Set it before the instance starts its workflows.
func (p *Points) HoldWorkflowSteps(steps faulthook.WorkflowSteps) {
	p.mu.Lock()
	p.steps = steps
	p.mu.Unlock()
}

// WorkflowSteps are what HoldWorkflowSteps set.
func (p *Points) WorkflowSteps() faulthook.WorkflowSteps {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.steps
}
