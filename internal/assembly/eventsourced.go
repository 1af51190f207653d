package assembly

import "github.com/trellis-go/trellis/eventsourced"

// sweepJournals adds the event-sourced journals' retention sweep
// (eventsourced.Sweeper) to the list: it trims the types started in setup,
// and stops before the cluster hands the shards over.
func sweepJournals(a *assembly) error {
	h := a.host
	sw := eventsourced.NewSweeper(eventsourced.SweeperOptions{Registry: h.Client.Registry(), Clock: h.Clock, Logger: h.Logger})
	a.add(part{name: "the journals' retention sweep", start: sw.Start, stop: sw.Shutdown})
	a.collectors = append(a.collectors, sw.Collector())
	return nil
}
