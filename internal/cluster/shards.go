package cluster

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/trellis-go/trellis/internal/keyspace"
)

// NumShards is the number of shards. It can never change once a release
// has written state under it (ShardOf and the shard tags depend on it).
// 256 is 85 shards per instance with 3 instances (so an even share is
// exact to one shard, 1.2 %), still 10 per instance with 25, and small
// enough that refreshing every record is one pipelined round of 256
// HMGETs and a full handoff, one shard at a time, takes well under a
// second.
const NumShards = 256

// shardTags are the hash tags of the shards: tag i's slot is in the i-th
// of NumShards equal slot ranges (keyspace.SpreadTags), so a cluster whose
// masters hold equal contiguous ranges gets an equal share of the shards
// (85 or 86 of 256 on 3 masters), not what CRC16 of "s0".."s255" gives.
// They depend only on the name "s" and NumShards, and must not change.
var shardTags = keyspace.SpreadTags("s", NumShards)

// ShardTag returns the hash tag of shard (without braces: pass it to
// keyspace.Space.Tagged). Every key of a shard, its record and later its
// entities' state, carries it, so one script can fence a write. It panics
// if shard is not in [0, NumShards).
func ShardTag(shard int) string { return shardTags[shard] }

// ShardOf returns the shard of an entity: FNV-1a 64 of
// "<len(type)>:<type>:<id>" (the length keeps type "a:b" id "c" apart
// from type "a" id "b:c"), mixed, modulo NumShards. It must never change
// once released: state is laid out by it.
func ShardOf(entityType, id string) int {
	var n [20]byte
	h := fnvAdd(fnvOffset, string(strconv.AppendInt(n[:0], int64(len(entityType)), 10)))
	h = fnvAdd(fnvAdd(fnvAdd(fnvAdd(h, ":"), entityType), ":"), id)
	return int(mix64(h) % NumShards)
}

// fnvOffset and fnvPrime are FNV-1a 64's parameters (hash/fnv's): ShardOf
// hashes its pieces in place, allocating nothing, as if concatenated.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// fnvAdd is FNV-1a 64 state h after the bytes of s.
func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix64 is the SplitMix64 finalizer: FNV's low bits, and the weights of
// nearby keys, are poorly spread; this spreads every input bit over the
// whole word.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// weight is the rendezvous score of member for shard: the member with
// the highest score is the shard's first choice.
func weight(member string, shard int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	return mix64(h.Sum64() ^ mix64(uint64(shard)+1))
}

// Assign returns the preferred owner of every shard (index = shard) among
// members, or nil when there are none. Every instance that sees the same
// members computes the same table, whatever their order.
//
// It is rendezvous hashing with a load cap: the pairs (shard, member) are
// taken from the highest score down, and a shard goes to the first
// member of its pairs that is not full: ⌊NumShards/n⌋ shards, or one more
// for the first NumShards mod n members to get there.
// Plain rendezvous hashing moves the fewest shards on a join or leave but
// leaves its shares uneven (±9 % at one standard deviation with 3
// members); the cap makes them even to one shard and moves only a few
// more: a shard changes hands only when its own first choices or a full
// member's overflow change.
func Assign(members []string) []string {
	ids := slices.Compact(slices.Sorted(slices.Values(members)))
	if len(ids) == 0 {
		return nil
	}
	type pair struct {
		w      uint64
		shard  int
		member int
	}
	pairs := make([]pair, 0, NumShards*len(ids))
	for s := range NumShards {
		for m, id := range ids {
			pairs = append(pairs, pair{weight(id, s), s, m})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.member, b.member))
	})
	// Every member may hold ⌊NumShards/n⌋; the first NumShards mod n to
	// reach that may hold one more.
	limit, extra := NumShards/len(ids), NumShards%len(ids)
	load := make([]int, len(ids))
	owners := make([]string, NumShards)
	for _, p := range pairs {
		if owners[p.shard] != "" || load[p.member] > limit || load[p.member] == limit && extra == 0 {
			continue
		}
		if load[p.member] == limit {
			extra--
		}
		owners[p.shard] = ids[p.member]
		load[p.member]++
	}
	return owners
}
