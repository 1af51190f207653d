package workflows

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/deadlines"
	"github.com/trellis-go/trellis/internal/entityhook"
	"github.com/trellis-go/trellis/internal/listing"
	"github.com/trellis-go/trellis/timers"
)

// Host is what a started workflow runs on.
type Host struct {
	// Entities is the host of the workflow's records: each instance is the
	// state of an internal entity of the workflow's component id, so its
	// writes are fenced, forwarded and batched as an entity's are. Its
	// Store must keep a change log (entities.ChangeLog: the embedded store,
	// or ShardedRedisStore in the cluster mode): the owner of a shard finds
	// the shard's running workflows there.
	Entities entities.Host
	// Timers wakes paused workflows whose pause lapses or that time out
	// (required).
	Timers *timers.Scheduler
	// Shards are the shards this instance serves; nil: every shard (one
	// instance on the embedded store).
	Shards Shards
	// Runners, when set, stops the workflow's runner with the others
	// (the service stops its Runners at shutdown); nil: call
	// Running.Stop.
	Runners *Runners
	// Logger receives the runner's failures (slog.Default when nil).
	Logger *slog.Logger
}

// Shards says which shards this instance serves now, and under which
// fence (consumers.Shards too). The cluster mode's node implements it.
type Shards interface {
	Serving(shard int) (entities.Fence, bool)
}

// ErrNoChangeLog is wrapped by Start when the store keeps no change log
// (Redis with the cluster mode off).
var ErrNoChangeLog = errors.New("the store keeps no change log")

// Running is a workflow type started on a host: its records' entity type
// and the runner that runs the steps of the instances whose shard this
// instance serves.
type Running[S any] struct {
	t         *Type[S]
	host      Host
	log       *slog.Logger
	clock     clockwork.Clock
	entity    *entities.Running[record]
	changes   entities.ChangeLog
	listings  listing.Shared // the listings of the type's states that resume and List read
	get       components.EntityMethod[components.Done, record]
	operation components.EntityMethod[Operation, record]

	metrics  *metrics
	series   stepSeries // metrics' series of each step, as first used
	statuses statuses   // the gauges' counts
	tracer   trace.Tracer
	limits   *deadlines.Book // the timeouts of the step runs in flight

	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc

	// hooks are a test kit's (see testhooks.go); none in a service.
	hooks testHooks

	mu     sync.Mutex
	active map[string]*drive // the instances a goroutine drives now
	// releasing are the shards being handed over, under the fence this
	// instance served them with.
	releasing map[int]cluster.Fence
	// lapsed are the shards whose drives stopLapsed stopped since
	// watchShards last looked: it resumes them once served.
	lapsed  map[int]bool
	stopped bool
	// life is the runner's since it started or last crashed: its drives
	// and its shard watch run in it.
	life life
	// crashed: the runner crashed and has not resumed yet; missed are
	// the instances woken meanwhile, woken again once it resumes.
	crashed bool
	missed  map[string]bool
	drives  sync.WaitGroup
	// drivers run the drives; idlers of them wait for one on idle.
	drivers sync.WaitGroup
	idle    chan driveJob
	idlers  atomic.Int32
	loops   sync.WaitGroup // the shard watches, and a crash's resume
}

// Start runs the workflow type on h: its records' entity type (registered
// in h.Entities.Client's registry under the workflow's component id, so
// its commands are invoked as an entity's) and its runner, which resumes
// every running instance of the shards this instance serves.
func (t *Type[S]) Start(h Host) (*Running[S], error) {
	if h.Timers == nil {
		return nil, fmt.Errorf("start workflow %q: Host.Timers is required", t.id)
	}
	changes, ok := h.Entities.Store.(entities.ChangeLog)
	if !ok {
		return nil, fmt.Errorf("start workflow %q: %w: workflows need the cluster mode on Redis, or the embedded store", t.id, ErrNoChangeLog)
	}
	if h.Entities.System == nil {
		return nil, fmt.Errorf("start workflow %q: Host.Entities.System is required", t.id)
	}
	r := &Running[S]{t: t, host: h, log: cmp.Or(h.Logger, slog.Default()).With("workflow", t.id),
		clock: h.Entities.System.Clock(), changes: changes, limits: deadlines.New(h.Entities.System.Clock()),
		get:       components.NewEntityMethod[components.Done, record](t.id, getMethod),
		operation: components.NewEntityMethod[Operation, record](t.id, operateMethod),
		active:    make(map[string]*drive), idle: make(chan driveJob), releasing: make(map[int]cluster.Fence), lapsed: make(map[int]bool),
		missed: make(map[string]bool)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.tracer = h.Entities.Client.Tracer()
	if h.Runners != nil {
		r.metrics = h.Runners.shared()
		r.hooks = h.Runners.testHooks()
	} else {
		r.metrics = newMetrics(nil)
	}
	// Its handlers build every change anew (see record.note), and what
	// leaves the workflow is detached: the entity holds the record decoded.
	// A record is made by the command that starts its workflow, and only
	// in the cluster mode or the embedded store (never the legacy layout):
	// a record not in memory is assumed new until a write says otherwise.
	et := entities.Define(t.id, func(string) record { return record{} }).KeepDecoded()
	entityhook.ExpectNew(et)
	t.mu.Lock()
	for _, add := range t.commands {
		add(et, r)
	}
	t.mu.Unlock()
	r.internalCommands(et)
	r.operatorCommand(et)
	entity, err := et.Start(h.Entities)
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("start workflow %q: %w", t.id, err)
	}
	r.entity = entity
	if h.Runners != nil {
		h.Runners.add(r)
	}
	r.mu.Lock()
	r.live()
	r.mu.Unlock()
	r.wakeMissed()
	return r, nil
}

// ComponentID is the workflow's component id.
func (r *Running[S]) ComponentID() string { return r.t.id }

// Steps are the names of the workflow's steps, sorted.
func (r *Running[S]) Steps() []string { return r.t.Steps() }

// Stop stops the runner: the steps that run are cancelled (their outcome
// is not committed; the next owner runs them again), and no step runs
// after. It waits for them, bounded by ctx.
func (r *Running[S]) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	done := make(chan struct{})
	go func() {
		r.loops.Wait()
		r.drives.Wait()
		r.drivers.Wait()
		r.limits.Abandon() // no run left to time out
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop workflow %q: %w", r.t.id, ctx.Err())
	}
}

// Runners are the workflow runners of a service, stopped together, and
// what the admin API lists and operates.
type Runners struct {
	mu      sync.Mutex
	running []Operated
	stopped bool
	metrics *metrics
	hooks   testHooks // a test kit's (see testhooks.go)
}

// shared is the runners' series, made on first use.
func (rs *Runners) shared() *metrics {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.metrics == nil {
		rs.metrics = newMetrics(rs)
	}
	return rs.metrics
}

// Collector is the workflows' series, for the service's registry:
// trellis_workflow_started_total, trellis_workflow_ended_total (by
// outcome), trellis_workflow_step_seconds and
// trellis_workflow_step_retries_total (by step), and the gauge
// trellis_workflow_instances (running and paused, on the shards this
// instance serves).
func (rs *Runners) Collector() prometheus.Collector { return rs.shared() }

// Operated is a started workflow type as an operator sees it, its state
// type erased.
type Operated interface {
	ComponentID() string
	// Steps are its steps' names, sorted.
	Steps() []string
	// List reads the instances of every shard from the store, those of
	// status (every one when ""), by id; more: there were more than limit.
	List(ctx context.Context, status Status, limit int) (records []Record, more bool, err error)
	// Inspect reads one instance from the owner of its shard.
	Inspect(ctx context.Context, id string) (Record, error)
	// Operate carries out an operator's action on one instance.
	Operate(ctx context.Context, id string, op Operation) (Record, error)
	// Stop stops its runner.
	Stop(ctx context.Context) error
}

func (rs *Runners) add(r Operated) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.running = append(rs.running, r)
}

// Types are the component ids of the started workflow types, sorted.
func (rs *Runners) Types() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ids := make([]string, 0, len(rs.running))
	for _, r := range rs.running {
		ids = append(ids, r.ComponentID())
	}
	slices.Sort(ids)
	return ids
}

// Lookup is the started workflow type of componentID: the *Running[S]
// its Start returned (Type.Running finds it typed).
func (rs *Runners) Lookup(componentID string) (Operated, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.running {
		if r.ComponentID() == componentID {
			return r, true
		}
	}
	return nil, false
}

// Stop stops every runner, bounded by ctx.
func (rs *Runners) Stop(ctx context.Context) error {
	rs.mu.Lock()
	running := rs.running
	rs.stopped = true
	rs.mu.Unlock()
	var errs []error
	for _, r := range running {
		errs = append(errs, r.Stop(ctx))
	}
	return errors.Join(errs...)
}

// Running is the runner that Start returned for t on h, so that a test of
// a service whose setup did not keep it finds it for
// trellistest.WaitWorkflow; false when t was not started there.
//
//	wf, ok := transfer.Transfers.Running(ts.Host().Workflows())
func (t *Type[S]) Running(h Host) (*Running[S], bool) {
	if h.Runners == nil {
		return nil, false
	}
	op, ok := h.Runners.Lookup(t.id)
	r, typed := op.(*Running[S])
	return r, ok && typed
}
