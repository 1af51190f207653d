package cluster

import "context"

// WaitHook is told when a call waits for a shard's owner on behalf of a
// context that carries it (see WithWaitHook): it is called as the wait
// begins, and the function it returns as the wait ends.
type WaitHook func(shard int) (end func())

type waitHookKey struct{}

// WithWaitHook returns ctx carrying hook. A consumer's worker gives its
// handler calls one, so that a shard's hand-over can cancel a handler
// that waits for another shard's owner instead of waiting for it.
func WithWaitHook(ctx context.Context, hook WaitHook) context.Context {
	return context.WithValue(ctx, waitHookKey{}, hook)
}

// Waiting tells ctx's WaitHook, if any, that a call waits for shard's
// owner; call the function it returns when the wait ends.
func Waiting(ctx context.Context, shard int) (end func()) {
	if hook, ok := ctx.Value(waitHookKey{}).(WaitHook); ok {
		return hook(shard)
	}
	return func() {}
}
