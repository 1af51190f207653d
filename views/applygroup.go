package views

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// applyGroup sends the batches the projectors apply at the same time in
// one pipeline: while one pipeline is under way, the batches that come
// wait and go together in the next (each still its own script, atomic on
// its own). A projector per view and shard applies its shard's changes as
// they come; without the group, each of hundreds of them would take a
// round trip, and a connection, of its own.
type applyGroup struct {
	client redis.UniversalClient

	mu      sync.Mutex
	queue   []*groupCall
	sending bool
}

// groupCall is one script run waiting in an applyGroup.
type groupCall struct {
	keys []string
	args []any
	n    int64
	err  error
	done chan struct{} // closed once n and err are set
}

// maxGroup is the most calls one pipeline sends: the scripts of a
// pipeline run one after the other, and a few hundred builds' batches of
// 100 rows would hold Redis for long.
const maxGroup = 64

// groupTimeout bounds one pipeline: the calls in it wait for it whatever
// their own contexts.
const groupTimeout = 10 * time.Second

// run runs applyScript with keys and args in the next pipeline and
// returns its reply, or ctx's error if ctx ends first (the script may
// run still: a batch applied again is a no-op). The call that finds no
// pipeline under way sends one at once.
func (g *applyGroup) run(ctx context.Context, keys []string, args []any) (int64, error) {
	c := &groupCall{keys: keys, args: args, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.sending
	g.sending = true
	g.mu.Unlock()
	if lead {
		g.send()
	}
	select {
	case <-c.done:
		return c.n, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// send sends the first calls queued (at most maxGroup) in one pipeline
// and ends them; the calls left or queued meanwhile go in the next
// pipeline, sent by a goroutine of its
// own (a caller whose batch is applied goes on at once).
func (g *applyGroup) send() {
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	calls := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	g.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	pipe := g.client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = applyScript.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is its call's
	for i, c := range calls {
		cmd := cmds[i]
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") { // the server lost its scripts: load it again
			cmd = applyScript.Run(ctx, g.client, c.keys, c.args...)
		}
		c.n, c.err = cmd.Int64()
	}

	g.mu.Lock()
	more := len(g.queue) > 0
	g.sending = more
	g.mu.Unlock()
	for _, c := range calls {
		close(c.done)
	}
	if more {
		go g.send()
	}
}
