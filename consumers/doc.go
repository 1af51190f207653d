// Package consumers acts on every state change of a key-value entity type,
// at least once, with no dual write: a consumer's handler gets each
// change (the entity id, its new state and revision, or its deletion)
// from the store's own record of the changes, which is written in the
// same atomic step as the state (see entities.ChangeLog).
//
//	// in the service's setup, after the entity type is started:
//	n := &Notifier{mailer: mailer}
//	_, err := consumers.Define("order-notices", ordering.Orders, n.Handle).Start(h.Consumers())
//
// with a handler such as
//
//	func (n *Notifier) Handle(ctx *consumers.Ctx, c consumers.Change[ordering.Order]) consumers.Effect {
//		if c.Deleted || !c.State.Confirmed {
//			return ctx.Ignore()
//		}
//		if err := n.mailer.Send(ctx.Context(), c.EntityID); err != nil {
//			return ctx.Error("mail order %s: %v", c.EntityID, err)
//		}
//		return ctx.Done()
//	}
//
// # Dependencies
//
// A consumer's definition holds no running state and needs not be
// package-level: define it in the service's setup with a method value of
// a value that holds what the handler needs (a mailer, an HTTP client,
// configuration), built there from the service's configuration. The same
// goes for timed actions' and endpoints' dependencies.
//
// # What it guarantees
//
//   - Every committed update or delete of the entity type made after the
//     consumer first started is handled at least once (the service's
//     start registers the consumer on every shard before it takes
//     traffic, or, when Redis does not answer then, each shard's worker
//     when it starts; changes before that are not recorded for it).
//   - In order per entity: a handler never sees a revision older than
//     one it was given before, except in a replay: after a crash, or a
//     move of the entity's shard to another instance, consumption resumes
//     from the shard's checkpoint, and the changes handled since it was
//     saved are handled again, in order. A worker saves its checkpoint at
//     most every 100 ms while it handles changes, within 100 ms of the
//     last one, and when it stops or hands its shard over: a crash
//     replays about the last 100 ms of changes. Handlers must be
//     idempotent.
//   - Every change: while an entity's change is retried, its later
//     changes wait behind it (at most entities.DefaultChangeLogLimit of
//     them; beyond, the last one waiting takes the newest state) and are
//     handled in order once it succeeds or becomes a dead letter.
//     WithCoalescing makes a consumer handle the latest state instead:
//     its later changes replace the failed one. Whatever the option, a
//     consumer behind the change log's bound (see below) handles the
//     current state of each entity instead of the changes it missed, and
//     misses the deletions among them.
//   - Several consumers of one entity type are independent: each has its
//     own checkpoints, retries and dead letters.
//
// # Where it runs
//
// Each shard's changes are consumed on the instance that serves the
// shard: in the cluster mode, its owner (the instance that wrote them);
// on the embedded store, the one instance. With Redis and the cluster
// mode off, Consumer.Start fails: that store keeps no change log. A shard
// is consumed by one worker per consumer, one change at a time; shards
// are consumed in parallel. Before a shard is handed over, its workers
// finish the handler in flight and save their checkpoints; the new owner
// resumes from them. A handler that waits for another shard's owner is
// not waited for: the hand-over cancels it, and the new owner handles its
// change again. WithHandlerTimeout bounds a consumer's handler calls.
//
// # Failures
//
// A handler's Error (or panic, or a state that does not decode) retries
// that entity's change with the timers' backoff (3 s, 6 s, 12 s, 24 s,
// then every 30 s, on the service's clock) while the shard's other
// entities go on. WithMaxRetries(n) bounds it: after n failed retries the
// change is kept as a dead letter (in Redis, or in memory), which the
// runner lists, retries (the handler runs once more, here and now) and
// drops; the entity's later changes go on meanwhile.
//
// # What it costs
//
// Every write of a shard with a registered consumer appends its change
// (in Redis's memory, the state plus 50 to 100 bytes for states of a few
// hundred bytes) to the shard's log in the same script,
// and hands it to the shard's workers in memory: a worker reads the log
// only when it starts, for a change it did not hear within 10 ms (a
// write whose reply was lost), and every 5 s. It saves its checkpoint at
// most every 100 ms (one script, which also trims the log). The log is trimmed to the lowest checkpoint of the shard's
// consumers and bounded to about entities.DefaultChangeLogLimit changes
// per shard (256 shards), whatever the checkpoints: a consumer that is
// stopped or slow for longer than that falls behind the bound and
// catches up from the current states. A consumer removed from the
// service keeps its checkpoints, which hold the log at that bound.
//
// # Lag
//
// Runner.Lag and the /metrics series trellis_consumer_lag_changes and
// trellis_consumer_lag_seconds say how far each consumer is behind on
// this instance's shards (changes of every type of the shard count);
// trellis_consumer_changes_total counts the handler's outcomes and
// trellis_consumer_dead_letters_total the dead letters.
package consumers
