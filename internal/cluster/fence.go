package cluster

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
)

// FenceLua defines the Lua function fence_holds(record, inc, epoch): true
// while the shard record at key record still names incarnation inc as its
// owner at epoch epoch. A script that writes a shard's state starts with
// it (see [FencedScript]), names the record among its KEYS (it shares the
// state's slot: [ShardTag]) and refuses the write when it is false, so a
// deposed owner's late write is refused atomically:
//
//	if not fence_holds(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
//	redis.call('SET', KEYS[2], ARGV[3])
//
//go:embed fence.lua
var FenceLua string

// FencedScript returns a script of FenceLua followed by body.
func FencedScript(body string) *redis.Script {
	return redis.NewScript(FenceLua + "\n" + body)
}

// Fence is what an owner's write carries: the shard, and the incarnation
// and epoch under which the owner acquired it. [Member.Acquire] returns it.
// It is the public components.Fence, so that the stores and runners of
// the public packages name it without naming this package.
type Fence = components.Fence
