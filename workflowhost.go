package trellis

import "github.com/trellis-go/trellis/workflows"

// Workflows is the workflows.Host to start workflows on: their records on
// the entities' store (forwarded and fenced as entities are), their pause
// timers on the service's scheduler, each shard's workflows run by the
// instance that serves it. The service stops their runners at shutdown,
// with the consumers, before it hands its shards over. With Redis and the
// cluster mode off, Start fails: the per-instance store keeps no change
// log to find a shard's workflows in.
func (h *Host) Workflows() workflows.Host {
	wh := workflows.Host{Entities: h.Entities(), Timers: h.Timers, Runners: &h.workflows, Logger: h.Logger}
	if h.node != nil {
		wh.Shards = h.node
	}
	return wh
}
