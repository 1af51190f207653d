package views

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
)

const (
	// batch is how many changes a projector reads and applies at once, in
	// one atomic step.
	batch = 100
	// checkpointEvery is how often a projector tells the change log how
	// far it is (so the log is trimmed): its own position is in the
	// view's store, written with its rows.
	checkpointEvery = time.Second
)

// projector applies one shard's changes to one view's rows, in the log's
// order, from the position the view's store holds. Each batch of changes
// is applied with the position of its last change in one atomic step, so
// a batch applied twice (a crash before the position was read back, a
// new owner) is a no-op the second time. A view never built on the shard,
// or behind the change log's bound, is built from the entities' current
// states.
type projector struct {
	r     *Runner
	d     *viewDef
	shard int
	fence cluster.Fence
	prev  *projector

	ctx      context.Context
	cancel   context.CancelFunc
	stop     chan struct{}
	stopOnce sync.Once
	kick     chan struct{}
	done     chan struct{}

	pos       uint64    // the last change applied
	builtFrom time.Time // when the build in progress read the log's head
	saved     uint64    // the checkpoint told to the log
	savedAt   time.Time

	lagMu sync.Mutex
	lag   Lag

	heardMu sync.Mutex
	heard   []entities.Change // see hear
}

func startProjector(r *Runner, d *viewDef, shard int, f cluster.Fence, prev *projector) *projector {
	ctx, cancel := context.WithCancel(context.Background())
	p := &projector{r: r, d: d, shard: shard, fence: f, prev: prev, ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *projector) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *projector) halt() { p.stopOnce.Do(func() { close(p.stop) }) }

func (p *projector) stopping() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

func (p *projector) wait(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.kick:
	case <-t.C:
	case <-p.stop:
	}
}

func (p *projector) warn(msg string, err error) {
	p.r.log.Warn("views: "+msg, "view", p.d.name, "shard", p.shard, "err", err.Error())
}

func (p *projector) run() {
	defer close(p.done)
	defer p.cancel()
	if p.prev != nil {
		<-p.prev.done
		p.prev = nil
	}
	for !p.stopping() {
		err := p.open()
		if err == nil {
			break
		}
		if errors.Is(err, entities.ErrFenced) {
			return
		}
		p.warn("open", err)
		p.wait(time.Second)
	}
	for !p.stopping() {
		more, err := p.step()
		switch {
		case errors.Is(err, entities.ErrFenced):
			return // the shard is another instance's now
		case err != nil:
			p.warn("apply the changes", err)
			p.wait(time.Second)
		case !more:
			p.wait(p.r.cfg.Poll)
		}
	}
	p.checkpoint(true)
}

// open registers the view in the shard's log, claims the shard's rows
// for p's fence and reads their position, and builds them if they never
// were.
func (p *projector) open() error {
	cp, err := p.r.cfg.Log.Register(p.ctx, consumerID(p.d.gen), p.shard)
	if err != nil {
		return err
	}
	pos, built, err := p.r.cfg.Store.open(p.ctx, p.fence, p.d, p.shard)
	if err != nil {
		return err
	}
	p.saved = cp
	if !built {
		return p.build()
	}
	p.pos = pos
	p.r.reached.note(p.d.gen, p.shard, p.pos)
	return nil
}

// step applies a batch of changes: those heard from this instance's
// writes when they follow the position with no gap, else a batch read
// from the log. more is true when changes are left: a full batch was
// read, or changes heard were not applied.
func (p *projector) step() (more bool, err error) {
	changes, head, heard := p.takeHeard()
	if !heard {
		var missed bool
		changes, head, missed, err = p.r.cfg.Log.Changes(p.ctx, p.shard, p.pos, batch)
		if err != nil {
			return false, err
		}
		if missed {
			p.r.log.Warn("views: behind the change log's bound; building the shard's rows from the current states",
				"view", p.d.name, "shard", p.shard, "position", p.pos, "head", head)
			return true, p.build()
		}
	}
	if len(changes) > 0 {
		ops, err := p.projectBatch(changes)
		if err != nil {
			return false, err
		}
		last := changes[len(changes)-1]
		if err := p.r.cfg.Store.apply(p.ctx, p.fence, p.d, p.shard, ops, modeApply, last.Seq); err != nil {
			return false, err
		}
		p.pos = last.Seq
		p.r.reached.note(p.d.gen, p.shard, p.pos)
		if len(ops) > 0 {
			p.r.noteApplied()
		}
	}
	p.noteLag(head, changes)
	p.checkpoint(false)
	return len(changes) == batch || p.heardLeft(), nil
}

// projectBatch maps changes (the shard's, of every type) to the ops on
// the view's rows, in order. A view over events folds each event into
// the row before it: the rows of the batch's entities are read first,
// and each op's row is the next event's.
func (p *projector) projectBatch(changes []entities.Change) ([]rowOp, error) {
	var rows map[string][]byte
	if p.d.events {
		var ids []string
		for _, c := range changes {
			if c.EntityType == p.d.entityType {
				ids = append(ids, c.EntityID)
			}
		}
		var err error
		if rows, err = p.r.cfg.Store.rows(p.ctx, p.d, ids); err != nil {
			return nil, err
		}
	}
	ops := make([]rowOp, 0, len(changes))
	for _, c := range changes {
		if c.EntityType != p.d.entityType {
			continue
		}
		op, ok, err := p.d.project(c, rows[c.EntityID])
		if err != nil {
			p.r.log.Error("views: the updater failed; the entity's row is left as it was", "view", p.d.name,
				"entity", c.EntityID, "seq", c.Seq, "err", err.Error())
			continue
		}
		if ok {
			op.since = c.Seq
			ops = append(ops, op)
			if rows != nil {
				rows[c.EntityID] = op.row
			}
		}
	}
	return ops, nil
}

// build sets the shard's rows from the entities' current states: the log's
// head is read first, every current state is applied, the rows of
// entities no longer there are removed, and the position is set to the
// head, so that the changes after it are applied next.
func (p *projector) build() error {
	_, head, _, err := p.r.cfg.Log.Changes(p.ctx, p.shard, 0, 1)
	if err != nil {
		return err
	}
	p.builtFrom = time.Now()
	keep := make(map[string]bool)
	var ops []rowOp
	flush := func() error {
		err := p.r.cfg.Store.apply(p.ctx, p.fence, p.d, p.shard, ops, modeBuild, 0)
		ops = ops[:0]
		return err
	}
	add := func(op rowOp) error {
		keep[op.id] = true
		op.since = head
		if ops = append(ops, op); len(ops) == batch {
			return flush()
		}
		return nil
	}
	if p.d.events {
		err = p.foldJournals(head, add)
	} else {
		err = p.currentStates(func(c entities.Change) error {
			op, ok, err := p.d.project(c, nil)
			if err != nil {
				p.r.log.Error("views: the updater failed on a current state; the entity has no row", "view", p.d.name,
					"entity", c.EntityID, "err", err.Error())
				return nil
			}
			if !ok || op.row == nil {
				return nil
			}
			return add(op)
		})
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	ids, err := p.r.cfg.Store.ids(p.ctx, p.d, p.shard)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !keep[id] {
			ops = append(ops, rowOp{id: id})
		}
	}
	if err := p.r.cfg.Store.apply(p.ctx, p.fence, p.d, p.shard, ops, modeBuilt, head); err != nil {
		return err
	}
	p.pos = head
	p.r.reached.note(p.d.gen, p.shard, p.pos)
	return nil
}

// checkpoint tells the log how far the view is, at most every
// checkpointEvery unless now.
func (p *projector) checkpoint(now bool) {
	if p.pos <= p.saved || !now && time.Since(p.savedAt) < checkpointEvery {
		return
	}
	if err := p.r.cfg.Log.SaveCheckpoint(p.ctx, p.fence, consumerID(p.d.gen), p.shard, p.pos); err != nil {
		if !errors.Is(err, entities.ErrFenced) {
			p.warn("save the checkpoint", err)
		}
		return
	}
	p.saved, p.savedAt = p.pos, time.Now()
}
