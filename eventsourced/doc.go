// Package eventsourced owns event-sourced entities: an entity whose state
// is the fold of a journal of events. A command returns an effect
// (persist events then reply from the state after them, reply, refuse,
// or delete), the entity appends the events to its journal in the store
// and applies them to its state; loading it reads its latest snapshot
// and the events after it. The journal (package entities' JournalStore:
// memory, Redis, and the sharded Redis of a cluster) keeps the events in
// order, numbered from 1 with no gap, appended in one atomic write that
// also records one change per event in the shard's change log, which
// consumers read (package consumers).
//
// An event-sourced entity is defined once, next to its events and
// commands:
//
//	var Wallets = eventsourced.Define("wallet", func(id string) Wallet { return Wallet{} }, apply,
//		eventsourced.SnapshotEvery(100))
//
//	func init() {
//		eventsourced.Event[Deposited](Wallets, "deposited")
//		eventsourced.Event[Withdrawn](Wallets, "withdrawn")
//	}
//
//	func apply(w Wallet, e any) Wallet {
//		switch e := e.(type) {
//		case Deposited:
//			w.Balance += e.Amount
//		case Withdrawn:
//			w.Balance -= e.Amount
//		}
//		return w
//	}
//
//	var Deposit = eventsourced.Command(Wallets, "deposit",
//		func(ctx *eventsourced.Ctx[Wallet, int], w Wallet, amount int) eventsourced.Effect[Wallet, int] {
//			if amount <= 0 {
//				return ctx.Invalid("deposit %d: must be positive", amount)
//			}
//			return ctx.Persist(Deposited{Amount: amount}).ThenReply(func(w Wallet) int { return w.Balance })
//		})
//
// and started in a service with Wallets.Start(host.Entities()); callers
// then write Deposit.Invoke(ctx, client, "w-1", 5), as for a key-value
// entity.
//
// Handlers and apply are pure functions: no I/O of their own, since after a
// write conflict with another instance the entity reloads and runs the
// command again, and apply runs again on every load. Each handler gets a
// state of its own (a copy), as in package entities.
//
// # Events and their names
//
// The events are a closed set of Go types, each added with [Event] under
// a stable name that the journal stores. Persisting a value of another
// type fails the command ([ErrUnregisteredEvent]) and writes nothing; an
// event larger than the type's [MaxEventSize] is refused
// (components.Invalid). An event whose shape changes gets a new name, and
// the old name an upcaster ([Upcast]) that turns the stored data into one
// of the current types. A journal event whose name the code knows neither
// as an event nor as an upcaster fails the entity's load with an error
// wrapping [ErrUnknownEvent] that names it: it is never skipped.
//
// # Snapshots and retention
//
// Every [SnapshotEvery] events (100 by default) the write that passes the
// multiple also stores the state after it as the entity's snapshot, in
// the same atomic step; a load reads that snapshot and the events after
// it, so its time does not grow with the journal. The journal is kept
// whole unless the type has [DropCoveredAfter]: then the events an
// entity's stored snapshot covers are dropped once that snapshot is older
// than the period, at the entity's next write or by the service's
// [Sweeper], whichever comes first.
//
// # Delete
//
// DeleteEntity appends its events (if any) and marks the entity deleted:
// its journal stays (for audit and export), and every later command is
// refused with components.NotFound, naming the entity.
//
// # In a cluster
//
// With a Host.Cluster the entity runs on its shard's owner (commands are
// routed there by entities.Route), answers replies from memory, and
// appends under the shard's fence: an owner that was deposed cannot
// append any more, and the commands that queued behind one another while
// the entity was busy run together, in order, their events appended in
// one write. A command that reaches a moved shard is routed again.
//
// # Applied once
//
// A command that persists events and carries an idempotency key
// (components.WithIdempotencyKey) or, forwarded in a cluster, the
// platform's command id has its answer recorded in the same atomic write
// as its events (entities.AppliedFor): a retry while the record is kept
// (Host.KeyRetention, Host.CommandIDRetention) gets the first answer and
// persists nothing. A command that persists nothing records nothing: a
// retry runs it again on the current state.
package eventsourced
