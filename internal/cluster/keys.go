package cluster

import "github.com/trellis-go/trellis/internal/keyspace"

// area is the keyspace area of every key of this package.
const area = "cluster"

// membersTag is the hash tag of every membership key: they are touched
// together by the join, leave and listing scripts (see the package doc).
const membersTag = "members"

// keys names a service's cluster keys; see the layout in the package doc.
type keys struct{ space keyspace.Space }

// member is the lease key of member id: <p>:cluster:{members}:member:<id>.
func (k keys) member(id string) string { return k.space.Tagged(area, membersTag, "member:"+id) }

// memberPrefix is member("") : the listing script appends the ids.
func (k keys) memberPrefix() string { return k.member("") }

// index is the set of member ids: <p>:cluster:{members}:index.
func (k keys) index() string { return k.space.Tagged(area, membersTag, "index") }

// shard is the record of shard: <p>:cluster:{<shard tag>}:shard.
func (k keys) shard(shard int) string { return ShardRecordKey(k.space, shard) }

// ShardRecordKey returns the key of shard's record in space:
// <prefix>:cluster:{<ShardTag(shard)>}:shard. A fenced script names it
// among its KEYS (see [FenceLua]).
func ShardRecordKey(space keyspace.Space, shard int) string {
	return space.Tagged(area, ShardTag(shard), "shard")
}
