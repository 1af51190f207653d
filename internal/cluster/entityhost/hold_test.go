package entityhost_test

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
)

// holdShard holds a membership's script calls on one shard's record (its
// acquisitions and releases) once armed: before a call runs, or after it
// ran and before its caller learns so, until the test lets go. Reached
// closes at the first call held.
type holdShard struct {
	armed   atomic.Pointer[holdPlan]
	reached chan struct{}
	letGo   chan struct{}
	once    sync.Once // closes reached
	gone    sync.Once // closes letGo
}

type holdPlan struct {
	key   string
	after bool // hold once the call ran
}

// arm (once) holds the next script calls on shard's record in the key space of
// prefix, before they run or, with after, once they ran.
func (h *holdShard) arm(prefix string, shard int, after bool) {
	h.reached, h.letGo = make(chan struct{}), make(chan struct{})
	h.armed.Store(&holdPlan{key: cluster.ShardRecordKey(keyspace.Must(prefix), shard), after: after})
}

// release lets the held calls, and all later ones, go; it is idempotent.
func (h *holdShard) release() {
	h.armed.Store(nil)
	h.gone.Do(func() { close(h.letGo) })
}

func (h *holdShard) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdShard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		plan := h.armed.Load()
		args := cmd.Args()
		if plan == nil || (cmd.Name() != "evalsha" && cmd.Name() != "eval") || len(args) < 4 || args[3] != plan.key {
			return next(ctx, cmd)
		}
		var err error
		if plan.after {
			err = next(ctx, cmd)
		}
		h.once.Do(func() { close(h.reached) })
		select {
		case <-h.letGo:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !plan.after {
			err = next(ctx, cmd)
		}
		return err
	}
}

func (h *holdShard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
