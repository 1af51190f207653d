// Package entities owns key-value entities: a state type with an empty
// state per id, commands that return effects (update the state then reply,
// delete then reply, reply, or a refusal with a kind: Error, NotFound,
// Conflict, Invalid), the entity actor that runs them one at a time per id
// on the runtime's local sharding, the state store (memory, Redis) that
// keeps each entity's state as JSON (encoding/json's, or the state's own
// when *S is a StateAppender), and the unit test kits (Try for one
// command, TestKit for commands in a row).
//
// A key-value entity is defined once, next to its commands:
//
//	var Counters = entities.Define("counter", func(id string) Counter { return Counter{} })
//
//	var Increase = entities.Command(Counters, "increase",
//		func(ctx *entities.Ctx[Counter, Counter], c Counter, by int) entities.Effect[Counter, Counter] {
//			if by <= 0 {
//				return ctx.Error("increase by %d: must be positive", by)
//			}
//			c.Value += by
//			return ctx.UpdateState(c).ThenReply(c)
//		})
//
// and started in a service with Counters.Start(host); callers then write
// Increase.Invoke(ctx, client, "c-1", 5).
//
// Each command's handler gets a state of its own, decoded afresh from what
// the entity holds as stored (Try and TestKit hand it a copy the same way):
// what a handler does to it in place, slices and maps included, reaches
// the entity only through UpdateState, so a reply or a refusal leaves the
// state exactly as stored. A handler is otherwise a pure function of
// (state, argument) → effect: it must do no I/O of its own, because after a
// write conflict with another server instance the entity reloads its state
// and runs the handler again.
//
// # In a cluster
//
// Started with a [Host.Cluster] (package internal/cluster/entityhost makes one),
// an entity type runs each entity on one instance only, the owner of the
// entity's shard: Invoke on any instance routes the command there (over
// the peer transport when that is another instance, with the caller's
// deadline), the owner answers commands that write nothing from memory,
// with no store round trip, and writes through a [FencedStore]
// ([ShardedRedisStore]) under the shard's fence, so that an owner that
// was deposed cannot write any more. Over a [BatchStore] (ShardedRedisStore
// is one), the commands that queued behind one another while an entity was
// busy run together, in order, each on the state the ones before it left,
// and what they updated is written in one call, each update with its own
// revision and change; their replies wait for that write. A command that meets a moved shard
// (ErrMoved) is routed again, up to 4 times. Without a Cluster nothing of this
// applies: every instance may run any entity, checking the stored
// revision on every command.
//
// # Applied once
//
// A command invoked with an idempotency key (components.WithIdempotencyKey:
// the ingress's Idempotency-Key, a workflow step's id, or a caller's own)
// is applied at most once per key: the entity records the key and the
// command's answer (its reply, or its refusal) in the same atomic write as
// its state ([AppliedStore]), and a retry within Host.KeyRetention (24 h
// by default) is answered with the first answer and writes nothing,
// whatever became of the first answer on its way back (a 504 included).
// A command that changes nothing records its answer too (a write of the
// record alone), so a retry gets the same answer even after the state
// moved on. A key is scoped to the entity and the command's name. In a
// cluster, a command forwarded to its entity's owner carries a command id
// (the caller's key, or a fresh one) recorded with its write for
// Host.CommandIDRetention (2 min by default), so that a forward answered
// as not run that did run, then routed again, is applied once (see
// Route). Expired records are trimmed by the
// entity's later writes, oldest first; a deleted entity's records are
// kept as long as its latest one.
package entities
