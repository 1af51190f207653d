package store

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

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
// it fails one (the outcome is unknown: ClassifyWrite).
//
// A caller whose context ends while its script waits gets the context's
// error at once; the script is then not sent if it has not been yet. The
// pipeline itself runs past its callers' deadlines, bounded by the
// client's read timeout: what is sent is read back.
type Batcher struct {
	client redis.UniversalClient
	slots  int

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

// NewBatcher returns a Batcher on client with slots sends in flight at
// most (at least 1).
func NewBatcher(client redis.UniversalClient, slots int) *Batcher {
	return &Batcher{client: client, slots: max(slots, 1)}
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
		return q.cmd
	case <-ctx.Done():
		// It may be sent still, or be in flight: its outcome is unknown,
		// as a single call's is when its context ends.
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// free ends a slot's send: the slot sends what queued meanwhile, on a
// goroutine of its own (the caller that held it has its reply), or is
// free again.
func (b *Batcher) free() {
	b.mu.Lock()
	batch := b.queue
	b.queue = nil
	if len(batch) == 0 {
		b.busy--
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	go func() {
		b.send(batch)
		b.free()
	}()
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
		_, _ = pipe.Exec(context.WithoutCancel(sent[0].ctx))
	}
	for _, q := range sent {
		if isNoScript(q.cmd.Err()) {
			q.cmd = q.script.Run(q.ctx, b.client, q.keys, q.args...)
		}
		close(q.done)
	}
}

// isNoScript reports whether err is Redis's NOSCRIPT: it did not have
// the script, and did not run anything.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
