package trellistest

import (
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/faulthook"
	"github.com/trellis-go/trellis/internal/testkit/faults"
)

// Faults of the instances of a cluster (see StartInstances): a kill and
// a partition from the other instances. Each instance's cluster
// connections, dialed and accepted, go through fault points of its own
// (withFaults), so each fault acts on that instance alone and the
// others need nothing to be cut off from it.

// Kill stops the instance the way kill -9 stops a process, but
// in-process: its HTTP and cluster listeners and connections close at
// once, requests in flight included (their clients see the connection
// break); it neither leaves the cluster nor hands its shards over (its
// membership lapses after the cluster lease, and only then do the others
// take its shards); it tells Redis nothing more (its timer claims wait
// out their lease). Kill returns once what still ran in-process has
// stopped, so the test leaks no goroutine; the test's end then has
// nothing left to stop. Killing twice is harmless.
func (ts *Service) Kill() {
	ts.HTTP.CloseIdleConnections()
	ts.faults.Kill()
}

// Partition cuts the instance's cluster port off from the other
// instances, both ways, but not from Redis: it keeps its membership and
// its shards, and still answers HTTP. Its cluster connections carry
// nothing from then on, without breaking (a call on one waits for its
// deadline, or until the transport's health check gives up on the
// connection), and its new ones wait to connect until Heal or their dial
// timeout. See "A network partition between instances" in
// docs/cluster.md for what the cluster then does.
func (ts *Service) Partition() { ts.faults.Partition() }

// Heal ends the partition: the connections that lived through it are
// reset (both sides see them break, as when TCP gives up on them) and new
// ones connect. The test's end heals an instance left partitioned, before
// stopping it.
func (ts *Service) Heal() { ts.faults.Heal() }

// faultsOption is the trellis.Option that hands an instance its fault
// points (internal/faulthook): the service takes them from it instead of
// applying it, so the option is no part of trellis's public API.
type faultsOption struct {
	trellis.Option // never applied
	points         *faults.Points
}

func (o faultsOption) FaultPoints() faulthook.Points { return o.points }

// withFaults routes the instance's cluster connections through p, and
// lets p kill it without a goodbye.
func withFaults(p *faults.Points) trellis.Option { return faultsOption{points: p} }

// withCrashes has the instance's workflow runners crash where crash says
// (CrashWorkflows).
func withCrashes(crash func(faulthook.WorkflowPoint) bool) Option {
	return func(o *options) { o.crash = crash }
}
