// Package cluster is the foundation of a Trellis cluster: which instances
// are alive (membership), which shard an entity belongs to, and which
// instance owns each shard, fenced so that at most one instance acts for
// a shard at any moment. It needs nothing but the Redis (or Redis
// Cluster) the service already has: there is no coordinator.
//
// # Pieces
//
//   - [Join] registers a [Member]: an id, an advertised transport address
//     and a lease that Redis expires by itself (PEXPIRE), renewed every
//     lease/3 by a background renewer. [Member.Drain] marks it as leaving,
//     [Member.Leave] deletes it. With [Config.ReplaceSameAddr], a process
//     restarted at the same address deletes its predecessor's membership
//     once that has stopped renewing, instead of waiting for its lease
//     (sameaddr.go).
//   - [ShardOf] maps an entity to one of [NumShards] shards; [ShardTag]
//     is the hash tag of a shard, so that state keys can share the slot
//     of their shard's record.
//   - [Assign] computes, from the live members alone, the preferred owner
//     of every shard (rendezvous hashing with a load cap): every instance
//     computes the same table.
//   - [Member.Acquire] and [Member.Release] change a shard's owner with a
//     compare-and-set script on its record; every change of owner adds one
//     to the record's epoch. [FenceLua] and [FencedScript] let any script in
//     the shard's slot refuse a write whose [Fence] is no longer current.
//   - [Lease] is an instance's own view of whether its membership is surely
//     alive; an owner acts for its shards only while it is.
//   - [Rebalancer] moves shards toward their preferred owners, one at a
//     time, and keeps a local table of who owns what ([Rebalancer.Owner]).
//   - [ReadView] reads the whole cluster for an operator, writing nothing:
//     every member with its heartbeat and lease, every shard with its
//     owner, epoch and state.
//
// # Key layout
//
//	<p>:cluster:{members}:member:<id>  hash addr, inc, beat, joined (, leaving); PEXPIRE lease; one per live member
//	<p>:cluster:{members}:index        set of member ids (dead ones until the next listing drops them)
//	<p>:cluster:{members}:moves        pub/sub channel: a member's incarnation, published at each move of its (announce.go)
//	<p>:cluster:{s.<N>.<k>}:shard      hash owner, inc, epoch; one per shard N
//	<p>:entity:{s.<N>.<k>}:…           the state of shard N's entities (entities.ShardedRedisStore)
//
// The members' keys share one tag so that joining, leaving and listing are
// single scripts in one slot: there are a handful of members and one
// renewal per member every lease/3, a load no master notices, and listing
// needs no SCAN of every master (which would walk every entity key). That
// slot's master is then needed by every member's renewals; a failover
// (seconds) is shorter than the lease, and while a master is down its
// shards cannot be written anyway.
//
// Each shard record carries its own tag, s.<N>.<k>: the first k that puts
// the tag in the N-th of 256 equal slot ranges ([ShardTag]), so that the
// shards, and later their entities, are spread evenly over the masters
// (85 or 86 per master of 3) rather than as CRC16 of "s<N>" falls. Two
// services sharing a Redis Cluster share these slots, which is harmless:
// their prefixes keep the keys apart.
//
// # Identity: id and incarnation
//
// A member is an id (stable, chosen by the caller: a uuid) and an
// incarnation, a random token drawn at every [Join]. A shard record names
// its owner by both. The renewal script renews only a key that still holds
// the renewer's incarnation, and nothing ever writes an incarnation again
// once its key is gone. So "the member key of incarnation X is absent" is
// permanent: once true, it stays true, even if the same id joins again.
//
// # Safety: at most one instance acts for a shard
//
// The member keys and the shard records live in different slots, so no
// script can check "the owner's lease has expired" and "take the shard"
// atomically on a Redis Cluster. Acquire therefore does it in two steps:
//
//  1. read the record: owner incarnation X, epoch e;
//  2. if X is set, read X's member key; if it still holds X, stop: the
//     shard is owned;
//  3. compare-and-set the record: only if it still says (X, e), write
//     (me, e+1).
//
// Step 2's answer "X is dead" cannot become false (see Identity), and step
// 3 fails if anyone changed the record after step 1, so the acquirer never
// deposes a live incarnation and two acquirers cannot both win one epoch.
//
// The deposed owner must have stopped acting before step 2 could see its
// key gone. It does, by [Lease]: it counts its lease from the moment it
// SENT the last renewal that Redis accepted, on its own monotonic clock,
// and trusts only lease×0.9 − margin of it. Redis set the key's expiry to
// lease after it RECEIVED that renewal, which is later. So the owner stops
// serving (reads included) before Redis can expire its key, unless its
// clock runs more than 10 % slower than Redis's (the margin absorbs
// scheduling jitter on top). A graceful release stops serving the shard
// before the release is sent; [Member.Leave] stops serving everything
// before it deletes the key.
//
// Fencing closes what timing cannot: a write from a deposed owner that
// was paused between its lease check and its write reaches Redis with an
// old (incarnation, epoch) and the fence in the write's own script refuses
// it, atomically, because the state key shares the record's slot. The
// fence compares the incarnation as well as the epoch, so a write is
// refused after a release too (the epoch stays, the owner is cleared),
// and even a record wiped by an operator, whose epochs start over, never
// matches an old owner's fence.
//
// An owner whose renewals fail (Redis unreachable) keeps trying and stops
// serving at the end of its window; it serves again once a renewal is
// accepted, which proves its key never expired, so no one can have taken
// its shards meanwhile. Once a renewal finds the key gone, the
// incarnation is dead for good ([Member.Lost]): the service joins again.
//
// # Liveness
//
// A crashed member's key expires at most one lease after its last
// renewal; the others' next pass (every lease/3) sees it and takes its
// shards, so they are served again within about lease × 4/3 (1.3 to 1.7 s
// with the tests' 1 s lease; about 13 s with [DefaultLease]). A member
// that leaves gracefully marks itself leaving first ([Member.Drain]), so
// each of its shards is taken as soon as its release is announced (a
// PUBLISH the others' rebalancers hear, announce.go), or within lease/3
// if that message is lost. A member that joins is given its shards the
// same way: its join is announced, its preferred shards' owners release
// them at once, and it takes each as its release is announced.
//
// What this rests on, and what breaks it: Redis must not lose an accepted
// renewal or an accepted acquire. A failover to a replica that had not
// received them (replication is asynchronous) can expire a member early
// or hand out an epoch twice; running with WAIT after these writes, or
// min-replicas-to-write, narrows that window (not done here). A wall-clock
// jump on the Redis server shortens key expiries the same way.
package cluster
