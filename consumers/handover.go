package consumers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/trellis-go/trellis/internal/cluster"
)

// call is what a worker knows of its handler call in flight, for its
// shard's hand-over: a hand-over waits for a handler at work, but not for
// one that waits for another shard's owner (which may be waiting for
// this very hand-over, or for an instance that is gone): it cancels that
// one, and the new owner handles the change again.
type call struct {
	mu      sync.Mutex
	cancel  context.CancelCauseFunc // the call in flight; nil: none
	waits   int                     // its waits for a shard's owner going on
	waitsOn int                     // the shard of the latest of them
	leaving bool                    // the worker stops: cancel a call that waits
}

// errLeftWaiting is the cause of a handler call cancelled by its
// worker's stop while it waited for another shard's owner.
var errLeftWaiting = errors.New("the consumer's shard was handed over while the handler waited for another shard's owner")

// begin notes a handler call in flight, cancelled by cancel, and returns
// ctx with the hook that tells the worker of its waits.
func (c *call) begin(ctx context.Context, cancel context.CancelCauseFunc) context.Context {
	c.mu.Lock()
	c.cancel, c.waits = cancel, 0
	c.mu.Unlock()
	return cluster.WithWaitHook(ctx, c.waiting)
}

// end notes that the call returned.
func (c *call) end() {
	c.mu.Lock()
	c.cancel = nil
	c.mu.Unlock()
}

// waiting is the call's WaitHook.
func (c *call) waiting(shard int) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits++
	c.waitsOn = shard
	c.cancelIfWaiting()
	return func() {
		c.mu.Lock()
		c.waits--
		c.mu.Unlock()
	}
}

// leave notes that the worker stops, and cancels the call in flight if
// it waits for a shard's owner (now or later).
func (c *call) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaving = true
	c.cancelIfWaiting()
}

// cancelIfWaiting cancels the call if the worker stops and it waits; c.mu
// is held.
func (c *call) cancelIfWaiting() {
	if c.leaving && c.waits > 0 && c.cancel != nil {
		c.cancel(fmt.Errorf("%w (shard %d)", errLeftWaiting, c.waitsOn))
	}
}
