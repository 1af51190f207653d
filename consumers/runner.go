package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/listing"
	"github.com/trellis-go/trellis/internal/shardwork"
	"github.com/trellis-go/trellis/timers"
)

// Shards says which shards this instance serves now, and under which
// fence: a consumer consumes a shard's changes only there. The cluster
// mode's node implements it.
type Shards interface {
	Serving(shard int) (entities.Fence, bool)
}

// ErrNoChangeLog is wrapped by Consumer.Start when the service's store
// keeps no change log (Redis with the cluster mode off).
var ErrNoChangeLog = errors.New("the store keeps no change log")

// Config is what NewRunner needs.
type Config struct {
	// Log is the store's change log; nil when the store keeps none, and
	// then a consumer's Start fails, saying NoLog.
	Log   entities.ChangeLog
	NoLog string
	// Shards are the shards this instance serves; nil: every shard (one
	// instance on the embedded store).
	Shards Shards
	// Client is the component client handlers get (required).
	Client *components.Client
	// Timers is the timer scheduler handlers get (Ctx.Timers); nil:
	// none.
	Timers *timers.Scheduler
	// DeadLetters keeps the changes that ran out of retries (required).
	DeadLetters DeadLetters
	// Clock times the retries (the real clock when nil).
	Clock clockwork.Clock
	// Logger receives failures and dead letters (slog.Default when nil).
	Logger *slog.Logger
	// HandlerTimeout bounds one call of a handler of a consumer defined
	// without WithHandlerTimeout (DefaultHandlerTimeout when zero).
	HandlerTimeout time.Duration
	// Poll is how often a worker reads its shard's log for changes it did
	// not hear from this instance's writes (DefaultPoll when zero).
	Poll time.Duration
}

// Defaults of Config's durations.
const (
	DefaultHandlerTimeout = 30 * time.Second
	DefaultPoll           = 5 * time.Second
	// superviseEvery is how often the runner looks at which shards this
	// instance serves, to start consuming those it has just taken.
	superviseEvery = 50 * time.Millisecond
	// handoverTimeout bounds the wait for a shard's handlers in flight
	// before it is handed over.
	handoverTimeout = 10 * time.Second
)

// Runner runs a service's consumers: for each consumer, one worker per
// shard this instance serves, which reads the shard's change log from
// the consumer's checkpoint. The service makes one, its setup adds the
// consumers (Consumer.Start), then the service starts it, and stops it at
// shutdown before the cluster hands its shards over. It is safe for
// concurrent use.
type Runner struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	mu        sync.Mutex
	consumers map[string]*consumer
	workers   *shardwork.Set[*worker]
	// byShard is each shard's workers, as in workers, for the writes to
	// hand their changes to with no lock.
	byShard [cluster.NumShards]atomic.Pointer[[]*worker]
	// listings are the listings of an entity type's states that the
	// workers of many shards catching up at once share (worker.resync).
	listings listing.Shared
	started  bool
	stopped  bool

	stop      chan struct{}
	loopDone  chan struct{}
	stopWatch func()
}

// NewRunner returns a Runner for cfg, not started.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Client == nil || cfg.DeadLetters == nil {
		return nil, errors.New("consumers: Config.Client and Config.DeadLetters are required")
	}
	cfg.Clock = cmp.Or[clockwork.Clock](cfg.Clock, clockwork.NewRealClock())
	cfg.HandlerTimeout = cmp.Or(cfg.HandlerTimeout, DefaultHandlerTimeout)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	r := &Runner{
		cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "consumers"),
		consumers: make(map[string]*consumer),
		stop:      make(chan struct{}), loopDone: make(chan struct{}),
	}
	var shards shardwork.Shards
	if cfg.Shards != nil {
		shards = cfg.Shards
	}
	r.workers = shardwork.New(shards, func(w *worker) entities.Fence { return w.fence }, (*worker).halt, r.indexShard)
	r.metrics = newMetrics(r)
	return r, nil
}

// handlerDeps is what the handlers get.
func (r *Runner) handlerDeps() handlerDeps {
	return handlerDeps{client: r.cfg.Client, timers: r.cfg.Timers}
}

// Running is a started consumer.
type Running struct {
	c *consumer
	r *Runner
}

// ID is the consumer's id.
func (r *Running) ID() string { return r.c.id }

// add adds c; see Consumer.Start.
func (r *Runner) add(c *consumer) (*Running, error) {
	if r.cfg.Log == nil {
		return nil, fmt.Errorf("start consumer %q: %w: %s", c.id, ErrNoChangeLog, r.cfg.NoLog)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.consumers[c.id]; dup {
		return nil, fmt.Errorf("start consumer %q: a consumer with this id is started already", c.id)
	}
	if r.stopped {
		return nil, fmt.Errorf("start consumer %q: the service's consumers are stopped", c.id)
	}
	r.consumers[c.id] = c
	if r.started {
		go r.register(context.Background(), c)
	}
	return &Running{c: c, r: r}, nil
}

// Consumers lists the ids of the consumers added.
func (r *Runner) Consumers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.consumers))
	for id := range r.consumers {
		ids = append(ids, id)
	}
	return ids
}

// Start registers every consumer on every shard (so that every change
// from now on is recorded for it, wherever its shard is served) and
// starts consuming. It returns at once: a failure to reach the store is
// logged, and each shard's worker registers again when it starts.
func (r *Runner) Start(ctx context.Context) {
	r.mu.Lock()
	if r.started || r.stopped {
		r.mu.Unlock()
		return
	}
	r.started = true
	cs := r.list()
	r.mu.Unlock()
	if r.cfg.Log == nil {
		close(r.loopDone)
		return
	}
	for _, c := range cs {
		r.register(ctx, c)
	}
	r.stopWatch = r.cfg.Log.Watch(r.heard)
	go r.supervise()
}

// register registers c on every shard.
func (r *Runner) register(ctx context.Context, c *consumer) {
	for shard := range cluster.NumShards {
		if _, err := r.cfg.Log.Register(ctx, c.id, shard); err != nil {
			r.log.Warn("consumers: register", "consumer", c.id, "err", err.Error())
			return
		}
	}
}

// list is the consumers; r.mu is held.
func (r *Runner) list() []*consumer {
	cs := make([]*consumer, 0, len(r.consumers))
	for _, c := range r.consumers {
		cs = append(cs, c)
	}
	return cs
}

// heard hands a change this instance recorded to its shard's workers.
func (r *Runner) heard(shard int, c entities.Change) {
	if ws := r.byShard[shard].Load(); ws != nil {
		for _, w := range *ws {
			w.offer(c)
		}
	}
}

// setWorker sets (or, w nil, removes) the worker of key; r.mu is held.
func (r *Runner) indexShard(shard int) {
	var ws []*worker
	for _, c := range r.consumers {
		if w := r.workers.Get(c.id, shard); w != nil {
			ws = append(ws, w)
		}
	}
	r.byShard[shard].Store(&ws)
}

// supervise starts a worker for every consumer on every shard served
// here, and stops those of shards no longer served, until Stop.
func (r *Runner) supervise() {
	defer close(r.loopDone)
	tick := time.NewTicker(superviseEvery)
	defer tick.Stop()
	for {
		r.pass()
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// pass is one look at the shards.
func (r *Runner) pass() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workers.Pass(r.ids(), func(id string, shard int, f entities.Fence, prev *worker) *worker {
		return startWorker(r, r.consumers[id], shard, f, prev)
	})
}

// ids are the consumers' ids; r.mu is held.
func (r *Runner) ids() []string {
	ids := make([]string, 0, len(r.consumers))
	for id := range r.consumers {
		ids = append(ids, id)
	}
	return ids
}

// BeforeRelease stops consuming shard before this instance hands it over:
// its workers finish the handler in flight and save their checkpoints
// (bounded by ctx and handoverTimeout; then the handlers' contexts are
// cancelled). A handler that waits for another shard's owner is
// cancelled at once rather than waited for: the new owner handles its
// change again. The shard is consumed again only under a new fence.
func (r *Runner) BeforeRelease(ctx context.Context, shard int) {
	ctx, cancel := context.WithTimeout(ctx, handoverTimeout)
	defer cancel()
	r.mu.Lock()
	ws := r.workers.Release(shard, r.ids())
	r.mu.Unlock()
	// A handler that overruns finds its checkpoint fenced.
	_ = r.halt(ctx, ws, fmt.Sprintf("the hand-over of shard %d", shard))
}

// Stop stops every worker: each finishes its handler in flight and saves
// its checkpoint, bounded by ctx (then the handlers' contexts are
// cancelled, and Stop returns ctx's error); a handler that waits for a
// shard's owner is cancelled at once. Nothing is consumed after.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	started := r.started
	ws := r.workers.TakeAll()
	r.mu.Unlock()
	if started {
		close(r.stop)
		<-r.loopDone
		if r.stopWatch != nil {
			r.stopWatch()
		}
	}
	// Workers the last pass started are in ws: the loop is over.
	r.mu.Lock()
	ws = append(ws, r.workers.TakeAll()...)
	r.mu.Unlock()
	return r.halt(ctx, ws, "the consumers' stop")
}

// slowHalt is how long a stop may wait for a worker before it is logged.
const slowHalt = time.Second

// halt stops ws and waits for them, bounded by ctx; what is the stop, as
// the log lines name it.
func (r *Runner) halt(ctx context.Context, ws []*worker, what string) error {
	started := time.Now()
	for _, w := range ws {
		w.halt()
		w.call.leave()
	}
	for _, w := range ws {
		from := time.Now()
		select {
		case <-w.done:
			if waited := time.Since(from); waited >= slowHalt {
				r.log.Info("consumers: "+what+" waited for a handler in flight", "consumer", w.c.id, "shard", w.shard,
					"waited", waited.Round(time.Millisecond).String())
			}
		case <-ctx.Done():
			for _, w := range ws {
				select {
				case <-w.done:
					continue
				default:
				}
				r.log.Warn("consumers: "+what+" ran out of time with a handler still running; cancelled it "+
					"(its change is handled again)", "consumer", w.c.id, "shard", w.shard,
					"waited", time.Since(started).Round(time.Millisecond).String(), "err", ctx.Err().Error())
				w.cancel()
			}
			return fmt.Errorf("stop the consumers (%s): %w", what, ctx.Err())
		}
	}
	return nil
}
