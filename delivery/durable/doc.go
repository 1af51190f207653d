// Package durable owns the durable producer queue of reliable delivery: the
// contract a store must keep ([Queue]: load the state, store a sent message,
// store a confirmation; [BatchQueue], optional: store several at once), the
// [State] it returns, the stored forms of a
// message ([MessageSent], [Chunk]), the [Codec] that turns messages into
// bytes, and an in-memory implementation ([Memory]) for tests.
//
// A producer controller with a durable queue stores every message before it
// sends it and stores confirmations behind the consumer's back (write-behind).
// When the producer's process dies, a new producer controller with the same
// producer id loads the state and sends every unconfirmed message again, with
// its old sequence number: delivery is at least once. A queue that several
// processes share is [Owned]: one producer controller at a time holds it by
// a lease, and a deposed one's stores are refused ([ErrFenced]); the
// others stand by ([ErrOwned]) and take it over when the lease lapses.
//
// The package imports neither the runtime nor the delivery package, so
// stores (such as the Redis one in package redisqueue) depend only on it.
package durable
