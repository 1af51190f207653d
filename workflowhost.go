package trellis

import (
	"github.com/trellis-go/trellis/internal/faulthook"
	"github.com/trellis-go/trellis/workflows"
)

// Workflows is the workflows.Host to start workflows on: their records on
// the entities' store (forwarded and fenced as entities are), their pause
// timers on the service's scheduler, each shard's workflows run by the
// instance that serves it. The service stops their runners at shutdown
// after the timers, before it hands its shards over. With Redis and the
// cluster mode off, Start fails: the per-instance store keeps no change
// log to find a shard's workflows in.
func (h *Host) Workflows() workflows.Host {
	return workflows.Host{Entities: h.Entities(), Timers: h.Timers, Runners: &h.workflows, Logger: h.Logger, Shards: h.shards}
}

// runWorkflows adds the workflows' runners to the list: after the cluster,
// so that they stop before it hands the shards over (a step that runs then
// is not committed, and the shard's next owner runs it again).
func runWorkflows(a *assembly) error {
	h := a.host
	if c, ok := a.o.faults.(faulthook.WorkflowCrashes); ok {
		faulthook.GiveWorkflowCrashes(&h.workflows, c) // a test kit's crash points
	}
	a.add(part{name: "the workflows' runners", stop: h.workflows.Stop})
	a.collectors = append(a.collectors, h.workflows.Collector())
	return nil
}
