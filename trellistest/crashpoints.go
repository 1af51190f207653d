package trellistest

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/faulthook"
)

// CrashWorkflows tests a service's workflows against crashes. scenario
// starts workflows on a service that setup makes (Start, with opts) and
// drives them to their end — waits for them (WaitWorkflow), sends the
// commands they wait for, moves the clock on (AdvanceTimers) — then
// returns what it checks: their states, the entities' states...
//
// It runs scenario once as it is, noting the crash points the workflows
// pass, then once per crash point, on a fresh service whose workflow
// runner crashes there: it does what a kill -9 of its instance does to
// it (the step in flight is cancelled and its outcome dropped, nothing
// more is written, what it held in memory is forgotten) and resumes as
// the next owner of the workflows' shards would, from the store. The
// crash points of a run are, for each step run, before it (the
// transition into it committed: after the commit, before the next step
// starts) and after it (its calls made, its outcome not committed), and
// for each pause with a timeout, before its timer is armed; a timer's
// wake-up is the point before the step it moves the workflow to.
//
// Every run's fake clock starts at the same instant, so times the
// scenario reads from it (or the service stores) compare between runs.
// Each crashed run must pass its point, end with the outcome of the run
// without a crash (reflect.DeepEqual), and write each entity (other than
// the workflows' own records) as many times as that run: no command a
// step invoked was applied twice. The scenario must be deterministic:
// the same points, in any order, on every run. CrashWorkflows returns the
// crash points, named "transfer t-1: after step withdraw (transition 2,
// attempt 1)", in the order the first run passed them.
func CrashWorkflows[O any](t *testing.T, setup trellis.Setup, scenario func(t testing.TB, ts *Service) O, opts ...Option) []string {
	t.Helper()
	opts = append(slices.Clip(opts), withClockAt(time.Now().Truncate(time.Millisecond)))
	var want crashOutcome[O]
	var first *crashRun
	ok := t.Run("no crash", func(t *testing.T) {
		first = &crashRun{}
		want = runCrashing(t, setup, scenario, first, opts)
	})
	if !ok {
		t.FailNow()
	}
	points := first.points()
	for _, at := range points {
		t.Run(at, func(t *testing.T) {
			run := &crashRun{at: at}
			got := runCrashing(t, setup, scenario, run, opts)
			if !run.done() {
				t.Fatalf("the run never passed %q: is the scenario deterministic?", at)
			}
			if !reflect.DeepEqual(got.outcome, want.outcome) {
				t.Errorf("crashed at %q: the outcome is\n\t%+v\nwant, as without a crash,\n\t%+v", at, got.outcome, want.outcome)
			}
			if !maps.Equal(got.writes, want.writes) {
				t.Errorf("crashed at %q: the entities were written %v times, want %v as without a crash", at, got.writes, want.writes)
			}
		})
	}
	return points
}

// crashOutcome is what a run of a scenario gave: its outcome, and the
// writes of each entity ("type/id") but the workflows' records.
type crashOutcome[O any] struct {
	outcome O
	writes  map[string]int
}

// runCrashing runs scenario on a fresh service that crashes as run says.
func runCrashing[O any](t *testing.T, setup trellis.Setup, scenario func(t testing.TB, ts *Service) O, run *crashRun, opts []Option) crashOutcome[O] {
	t.Helper()
	ts := Start(t, setup, append(slices.Clip(opts), withCrashes(run.crash))...)
	changes, ok := ts.Host().Store.(entities.ChangeLog)
	if !ok {
		t.Fatalf("CrashWorkflows: the service's store keeps no change log (Redis needs the cluster mode)")
	}
	// A shard records its changes, which Watch hears, once a consumer is
	// registered there: this one reads none, it only makes every write heard.
	for shard := range cluster.NumShards {
		if _, err := changes.Register(context.Background(), crashWritesConsumer, shard); err != nil {
			t.Fatalf("CrashWorkflows: record the changes of shard %d: %v", shard, err)
		}
	}
	var mu sync.Mutex
	writes := make(map[string]int)
	stop := changes.Watch(func(_ int, c entities.Change) {
		mu.Lock()
		writes[c.EntityType+"/"+c.EntityID]++
		mu.Unlock()
	})
	defer stop()
	out := scenario(t, ts)
	mu.Lock()
	defer mu.Unlock()
	for _, wf := range ts.Host().Workflows().Runners.Types() {
		maps.DeleteFunc(writes, func(k string, _ int) bool { return len(k) > len(wf) && k[:len(wf)+1] == wf+"/" })
	}
	return crashOutcome[O]{outcome: out, writes: writes}
}

// crashWritesConsumer is the consumer CrashWorkflows registers on every
// shard so that each write is recorded, and counted.
const crashWritesConsumer = "trellistest-crash-writes"

// crashRun is one run's crash points: those it passed, and the one it
// crashes at ("" for none), once.
type crashRun struct {
	at string

	mu      sync.Mutex
	crashed bool
	passed  []string
	seen    map[string]bool
}

// crash is the service's faulthook.WorkflowCrashes: true at run's point,
// the first time it is passed.
func (run *crashRun) crash(p faulthook.WorkflowPoint) bool {
	name := pointName(p)
	run.mu.Lock()
	defer run.mu.Unlock()
	if !run.seen[name] {
		if run.seen == nil {
			run.seen = make(map[string]bool)
		}
		run.seen[name] = true
		run.passed = append(run.passed, name)
	}
	if name == run.at && !run.crashed {
		run.crashed = true
		return true
	}
	return false
}

// points are the points run passed, in the order it first did.
func (run *crashRun) points() []string {
	run.mu.Lock()
	defer run.mu.Unlock()
	return slices.Clone(run.passed)
}

// done reports whether run crashed at its point.
func (run *crashRun) done() bool {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.crashed
}

// pointName names a crash point.
func pointName(p faulthook.WorkflowPoint) string {
	if p.Step == "" {
		return fmt.Sprintf("%s %s: %s (transition %d)", p.Workflow, p.ID, p.Where, p.Transition)
	}
	return fmt.Sprintf("%s %s: %s %s (transition %d, attempt %d)", p.Workflow, p.ID, p.Where, p.Step, p.Transition, p.Attempt)
}

// withClockAt starts the service's fake clock at at (CrashWorkflows: every
// run at the same instant).
func withClockAt(at time.Time) Option {
	return func(o *options) { o.clockAt = at }
}
