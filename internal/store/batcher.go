package store

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batcher runs scripts for many callers at once, sending those that wait
// together as one pipeline: one write and one read on a connection for
// all of them, where each alone costs a round trip of its own. A caller
// whose script finds a slot free sends it at once, alone (no wait is
// added while Redis keeps up); once every slot has a send in flight, the
// scripts that come meanwhile queue, and the next slot to free sends them
// all. Each script still runs alone in Redis, with its own reply and its
// own error; a connection lost mid-pipeline fails every script of it as
// it fails one (the outcome is unknown: ClassifyWrite). With one slot,
// it is a group commit: while one pipeline is under way, the scripts that
// come go together in the next.
//
// A caller whose context ends while its script is queued gets the
// context's error at once, and the script is not sent; once a send has
// taken it, the caller waits for its reply, which pipelineTimeout bounds
// (the pipeline runs past its callers' deadlines: what is sent is read
// back). Run never returns while its arguments may still be read, so a
// caller may reuse them once it has returned.
type Batcher struct {
	client redis.UniversalClient
	slots  int
	most   int // scripts one pipeline sends at most; 0: no bound

	mu    sync.Mutex
	busy  int       // slots with a send in flight
	queue []*queued // scripts waiting for a slot, in order

	batched atomic.Int64 // scripts sent in a pipeline, for tests
}

// queued is a script waiting for a slot.
type queued struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
}

// pipelineTimeout bounds one pipeline: the scripts in it wait for it
// whatever their callers' contexts.
const pipelineTimeout = 10 * time.Second

// NewBatcher returns a Batcher on client with slots sends in flight at
// most (at least 1), each pipeline of most scripts at most (0: no bound;
// the scripts of a pipeline run one after the other in Redis, so long
// ones are better sent a bounded number at a time).
func NewBatcher(client redis.UniversalClient, slots, most int) *Batcher {
	return &Batcher{client: client, slots: max(slots, 1), most: max(most, 0)}
}

// Client is the client the batcher sends on.
func (b *Batcher) Client() redis.UniversalClient { return b.client }

// Run runs script on keys and args, as script.Run does: EVALSHA, and
// EVAL when Redis does not have the script.
func (b *Batcher) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	b.mu.Lock()
	if b.busy < b.slots {
		b.busy++
		b.mu.Unlock()
		cmd := script.Run(ctx, b.client, keys, args...)
		b.free()
		return cmd
	}
	q := &queued{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	b.queue = append(b.queue, q)
	b.mu.Unlock()
	select {
	case <-q.done:
	case <-ctx.Done():
		if b.drop(q) {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(ctx.Err())
			return cmd
		}
		<-q.done // a send took it: its reply comes within pipelineTimeout
	}
	return q.cmd
}

// drop takes q out of the queue; false if a send has taken it already.
func (b *Batcher) drop(q *queued) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, q)
	if i < 0 {
		return false
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	return true
}

// free ends a slot's send: the slot sends what queued meanwhile, on a
// goroutine of its own (the caller that held it has its reply), or is
// free again.
func (b *Batcher) free() {
	if batch := b.next(); batch != nil {
		go b.sendAll(batch)
	}
}

// sendAll sends batch, then what queued meanwhile, until nothing has: a
// slot under steady load keeps one goroutine.
func (b *Batcher) sendAll(batch []*queued) {
	for batch != nil {
		b.send(batch)
		batch = b.next()
	}
}

// next takes the scripts queued for a slot whose send ended, up to most;
// nil when none queued, and the slot is free again.
func (b *Batcher) next() []*queued {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := b.queue
	if b.most > 0 && len(batch) > b.most {
		batch = batch[:b.most:b.most]
		b.queue = slices.Clone(b.queue[b.most:])
	} else {
		b.queue = nil
	}
	if len(batch) == 0 {
		b.busy--
		return nil
	}
	return batch
}

// send sends batch as one pipeline and hands each caller its reply.
func (b *Batcher) send(batch []*queued) {
	pipe := b.client.Pipeline()
	var sent []*queued
	for _, q := range batch {
		if err := q.ctx.Err(); err != nil {
			q.cmd = redis.NewCmd(q.ctx)
			q.cmd.SetErr(err)
			close(q.done)
			continue
		}
		q.cmd = q.script.EvalSha(q.ctx, pipe, q.keys, q.args...)
		sent = append(sent, q)
	}
	b.batched.Add(int64(len(sent)))
	if len(sent) > 0 {
		// Each command keeps its own error; Exec's is the first of them.
		// The pipeline runs under the first caller's values (its logger).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(sent[0].ctx), pipelineTimeout)
		_, _ = pipe.Exec(ctx)
		cancel()
	}
	for _, q := range sent {
		if redis.HasErrorPrefix(q.cmd.Err(), "NOSCRIPT") { // Redis lost its scripts: load it again
			q.cmd = q.script.Run(q.ctx, b.client, q.keys, q.args...)
		}
		close(q.done)
	}
}
