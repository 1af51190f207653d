package views

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/listing"
	"github.com/trellis-go/trellis/internal/shardwork"
)

// Shards says which shards this instance serves now, and under which
// fence: a view's shard is projected only there. The cluster mode's node
// implements it.
type Shards interface {
	Serving(shard int) (entities.Fence, bool)
}

// Config is what NewRunner needs.
type Config struct {
	// Log is the store's change log; nil when the store keeps none, and
	// then a view's Start fails, saying NoLog.
	Log   entities.ChangeLog
	NoLog string
	// Store keeps the views (required): NewMemoryStore with the embedded
	// entity store, NewRedisStore with Redis.
	Store Store
	// Shards are the shards this instance serves; nil: every shard.
	Shards Shards
	// Logger receives failures (slog.Default when nil).
	Logger *slog.Logger
	// Poll is how often a projector reads its shard's log for changes it
	// was not told of (DefaultPoll when zero).
	Poll time.Duration
}

// DefaultPoll is Config.Poll's default: changes this instance writes
// wake their projector at once; others' (a shard's owner may have
// changed) are read at least this often.
const DefaultPoll = time.Second

const (
	superviseEvery  = 50 * time.Millisecond
	handoverTimeout = 10 * time.Second
)

// Runner runs a service's views: for each view, a projector per shard
// this instance serves, which applies the shard's changes to the view's
// rows; and it answers the views' queries (on any instance: the rows are
// in the store). The service makes one, its setup starts the views
// (View.Start), then the service starts it, and stops it at shutdown
// before the cluster hands its shards over. It is safe for concurrent
// use.
type Runner struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	views      map[string]*viewDef
	projectors *shardwork.Set[*projector]
	started    bool
	stopped    bool

	stop      chan struct{}
	loopDone  chan struct{}
	stopWatch func()

	gens     generations
	swapDone chan struct{}
	built    builtGens // see builtEverywhere

	keyMu sync.Mutex
	key   []byte // see sealKey

	listings listing.Shared // see projector.build
	reached  reached        // see waitGen

	appliedMu sync.Mutex
	applied   chan struct{} // closed, and made anew, when a projector here applies a batch
}

// NewRunner returns a Runner for cfg, not started.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Store == nil {
		return nil, errors.New("views: Config.Store is required")
	}
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	var shards shardwork.Shards
	if cfg.Shards != nil {
		shards = cfg.Shards
	}
	log := cmp.Or(cfg.Logger, slog.Default()).With("component", "views")
	return &Runner{
		cfg: cfg, log: log, reached: reached{read: cfg.Store.positions, log: log},
		views: make(map[string]*viewDef),
		projectors: shardwork.New(shards, func(p *projector) cluster.Fence { return p.fence },
			(*projector).halt, nil),
		stop: make(chan struct{}), loopDone: make(chan struct{}), applied: make(chan struct{}),
		swapDone: make(chan struct{}),
	}, nil
}

// consumerID is the name a view registers under in the change log: the
// log keeps a shard's changes for it until it applied them.
func consumerID(view string) string { return "view:" + view }

func (r *Runner) add(d *viewDef) error {
	if r.cfg.Log == nil {
		return fmt.Errorf("start view %q: %w: %s", d.name, ErrNoChangeLog, r.cfg.NoLog)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.views[d.name]; dup {
		return fmt.Errorf("start view %q: a view with this name is started already", d.name)
	}
	if r.stopped {
		return fmt.Errorf("start view %q: the service's views are stopped", d.name)
	}
	r.views[d.name] = d
	if r.started {
		go r.register(context.Background(), d)
	}
	return nil
}

// view is the started view named name.
func (r *Runner) view(name string) (*viewDef, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.views[name]; d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("view %q: %w", name, ErrNotStarted)
}

// Views lists the names of the views started.
func (r *Runner) Views() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names()
}

// Start registers every view in every shard's change log (so that every
// change from now on is kept for it) and starts projecting. It returns at
// once: a failure to reach the store is logged, and each projector
// registers again when it starts.
func (r *Runner) Start(ctx context.Context) {
	r.mu.Lock()
	if r.started || r.stopped {
		r.mu.Unlock()
		return
	}
	r.started = true
	ds := make([]*viewDef, 0, len(r.views))
	for _, d := range r.views {
		ds = append(ds, d)
	}
	r.mu.Unlock()
	if r.cfg.Log == nil {
		close(r.loopDone)
		close(r.swapDone)
		return
	}
	for _, d := range ds {
		r.register(ctx, d)
	}
	r.stopWatch = r.cfg.Log.Watch(r.heard)
	go r.supervise()
	go r.swapLoop()
}

func (r *Runner) register(ctx context.Context, d *viewDef) {
	for shard := range numShards {
		if _, err := r.cfg.Log.Register(ctx, consumerID(d.gen), shard); err != nil {
			r.log.Warn("views: register", "view", d.name, "err", err.Error())
			return
		}
	}
}

// heard hands c to the projectors of the shard this instance wrote it
// to.
func (r *Runner) heard(shard int, c entities.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range r.views {
		if p := r.projectors.Get(name, shard); p != nil {
			p.hear(c)
		}
	}
}

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

// pass starts a projector for every view on every shard served here, and
// stops those of shards no longer served.
func (r *Runner) pass() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.projectors.Pass(r.names(), func(name string, shard int, f cluster.Fence, prev *projector) *projector {
		return startProjector(r, r.views[name], shard, f, prev)
	})
}

// names are the views' names; r.mu is held.
func (r *Runner) names() []string {
	names := make([]string, 0, len(r.views))
	for name := range r.views {
		names = append(names, name)
	}
	return names
}

// BeforeRelease stops projecting shard before this instance hands it
// over (bounded by ctx): it is projected again only under a new fence.
func (r *Runner) BeforeRelease(ctx context.Context, shard int) {
	ctx, cancel := context.WithTimeout(ctx, handoverTimeout)
	defer cancel()
	r.mu.Lock()
	ps := r.projectors.Release(shard, r.names())
	r.mu.Unlock()
	_ = r.halt(ctx, ps)
}

// Stop stops every projector, each after the batch it is applying,
// bounded by ctx. Queries still answer from the store after.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	started := r.started
	r.mu.Unlock()
	if started {
		close(r.stop)
		<-r.loopDone
		<-r.swapDone
		if r.stopWatch != nil {
			r.stopWatch()
		}
	}
	r.mu.Lock()
	ps := r.projectors.TakeAll()
	r.mu.Unlock()
	return r.halt(ctx, ps)
}

func (r *Runner) halt(ctx context.Context, ps []*projector) error {
	for _, p := range ps {
		p.halt()
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-ctx.Done():
			for _, p := range ps {
				p.cancel()
			}
			return fmt.Errorf("stop the views: %w", ctx.Err())
		}
	}
	return nil
}
