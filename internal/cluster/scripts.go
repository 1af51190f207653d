package cluster

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts, one per file beside this one; each file's header says its
// KEYS, ARGV and reply. Values cross the Lua boundary as strings: epochs
// are compared as decimal strings, never as Lua numbers.
var (
	//go:embed join.lua
	joinLua    string
	joinScript = redis.NewScript(joinLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed leave.lua
	leaveLua    string
	leaveScript = redis.NewScript(leaveLua)

	//go:embed drain.lua
	drainLua    string
	drainScript = redis.NewScript(drainLua)

	//go:embed replace.lua
	replaceLua    string
	replaceScript = redis.NewScript(replaceLua)

	//go:embed members.lua
	membersLua    string
	membersScript = redis.NewScript(membersLua)

	//go:embed view.lua
	viewLua    string
	viewScript = redis.NewScript(viewLua)

	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)
