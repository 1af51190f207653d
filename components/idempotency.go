package components

import "context"

type idempotencyKey struct{}

// WithIdempotencyKey returns ctx carrying key: a command of a key-value
// entity invoked with it (through a Client, Invoke or Dispatch, here or
// forwarded to the entity's owner) is applied at most once for the key.
// The entity records the key and the command's answer (its reply, or its
// refusal such as a conflict) in the same atomic write as its state, and
// keeps the record for the retention period (entities.Host.KeyRetention,
// 24 h by default): a retry with the same key within it is answered with
// the first answer and changes nothing, whatever became of the first
// answer on its way back. A key is scoped to the entity and the command:
// the same key on another entity, or on another command of the same
// entity, is another key. The key is stored as it is: keep it short. An
// empty key is no key: ctx is returned as it is.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// WithoutIdempotencyKey returns ctx without the key it carries, if any:
// a command invoked with it is not answered from an earlier command's
// record, and one that changes nothing (a read) records nothing. A
// workflow step's context carries the step's key, so a read in a step is
// recorded, and answered the same when the step runs again; reading with
// this context reads the entity as it is, and writes nothing.
func WithoutIdempotencyKey(ctx context.Context) context.Context {
	if _, ok := IdempotencyKeyFrom(ctx); !ok {
		return ctx
	}
	return context.WithValue(ctx, idempotencyKey{}, nil)
}

// IdempotencyKeyFrom is the key WithIdempotencyKey put in ctx, if any.
func IdempotencyKeyFrom(ctx context.Context) (string, bool) {
	key, ok := ctx.Value(idempotencyKey{}).(string)
	return key, ok
}

type commandID struct{}

// WithCommandID returns ctx carrying id, the platform's own id of one
// command (not a caller's key): entities give a command they route an id
// (the caller's idempotency key, or a fresh one) before they first forward
// it to another instance, so that a command routed again after a forward
// that was answered as not run, but ran, is applied once. It works as an
// idempotency key kept for a short time (entities.Host.CommandIDRetention).
// Services do not call it; it is exported for the platform's packages (the
// cluster transport carries it with a forwarded command).
func WithCommandID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, commandID{}, id)
}

// CommandIDFrom is the id WithCommandID put in ctx, if any.
func CommandIDFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(commandID{}).(string)
	return id, ok
}
