package components

import "strconv"

// Fence is what an entity owner's write carries in a cluster: the shard,
// and the incarnation (of the member that owns it) and epoch under which
// it was acquired. A store refuses a write whose fence no longer holds, so
// a deposed owner's late write is refused. The zero Fence is no fence: a
// store of one instance takes it. The cluster's membership makes them;
// stores (entities.FencedStore) and the runners of shards (consumers,
// views, workflows) carry them.
type Fence struct {
	Shard       int
	Incarnation string
	Epoch       uint64
}

// Args returns the incarnation and the epoch as a fenced Redis script
// takes them in its ARGV (see the cluster's fence_holds).
func (f Fence) Args() []any { return f.AppendArgs(nil) }

// AppendArgs appends Args to args, for a script's ARGV that goes on after
// them.
func (f Fence) AppendArgs(args []any) []any {
	return append(args, f.Incarnation, strconv.FormatUint(f.Epoch, 10))
}
