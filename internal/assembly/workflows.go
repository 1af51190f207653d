package assembly

// runWorkflows adds the workflows' runners to the list: after the cluster,
// so that they stop before it hands the shards over (a step that runs then
// is not committed, and the shard's next owner runs it again).
func runWorkflows(a *assembly) error {
	h := a.host
	a.add(part{name: "the workflows' runners", stop: h.Workflows.Stop})
	a.collectors = append(a.collectors, h.Workflows.Collector())
	return nil
}
