package assembly

import "github.com/trellis-go/trellis/internal/faulthook"

// runWorkflows adds the workflows' runners to the list: after the cluster,
// so that they stop before it hands the shards over (a step that runs then
// is not committed, and the shard's next owner runs it again).
func runWorkflows(a *assembly) error {
	h := a.host
	if c, ok := a.cfg.Faults.(faulthook.WorkflowCrashes); ok {
		faulthook.GiveWorkflowCrashes(&h.Workflows, c) // a test kit's crash points
	}
	if s, ok := a.cfg.Faults.(faulthook.WorkflowStepping); ok && s.WorkflowSteps() != nil {
		faulthook.GiveWorkflowSteps(&h.Workflows, s.WorkflowSteps()) // a test kit's stepping
	}
	a.add(part{name: "the workflows' runners", stop: h.Workflows.Stop})
	a.collectors = append(a.collectors, h.Workflows.Collector())
	return nil
}
