package workflows

import "github.com/trellis-go/trellis/internal/faulthook"

// A test kit's hooks into the runners (internal/faulthook): its crash
// points (see crash.go) and its stepping (see stepping.go), handed to a
// service's Runners before its workflows start. A service has none.

// testHooks are the hooks a test kit handed to the runners.
type testHooks struct {
	crashes faulthook.WorkflowCrashes // nil: no runner crashes
	steps   faulthook.WorkflowSteps   // nil: the steps run freely
}

func init() {
	faulthook.GiveWorkflowCrashes = func(runners any, c faulthook.WorkflowCrashes) {
		runners.(*Runners).hook(func(h *testHooks) { h.crashes = c })
	}
	faulthook.GiveWorkflowSteps = func(runners any, s faulthook.WorkflowSteps) {
		runners.(*Runners).hook(func(h *testHooks) { h.steps = s })
	}
}

// hook sets one of the runners' hooks.
func (rs *Runners) hook(set func(*testHooks)) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	set(&rs.hooks)
}

// testHooks are the hooks the runners' workflows are started with.
func (rs *Runners) testHooks() testHooks {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.hooks
}

// point is the point where of id's run at, as the hooks see it.
func (r *Running[S]) point(where, id string, at attempt) faulthook.WorkflowPoint {
	p := faulthook.WorkflowPoint{Workflow: r.t.id, ID: id, Where: where, Step: at.step, Transition: at.transition, Attempt: at.number}
	if where == pointBeforeTimer {
		p.Attempt = 0
	}
	return p
}
