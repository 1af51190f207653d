package views

import (
	"context"
	"strings"

	"github.com/trellis-go/trellis/internal/cluster"
)

const numShards = cluster.NumShards

// Store keeps views' rows, their index entries and the position of the
// last change applied, per view and shard: NewMemoryStore (the embedded
// store's) or NewRedisStore (Redis and Redis Cluster, each shard's keys in
// its slot).
type Store interface {
	// position is the last change applied to the rows of shard of view
	// (a generation's key: viewDef.gen); built
	// is false when the shard's rows were never built.
	position(ctx context.Context, view string, shard int) (pos uint64, built bool, err error)
	// apply applies ops, in order, in one atomic step, under f (refused
	// with entities.ErrFenced when f no longer holds; an empty fence is
	// not checked), and per mode: modeApply sets the position to to, and
	// is a no-op when the position is at to or after already (a replay);
	// modeBuild leaves the position as it is; modeBuilt sets it to to,
	// whatever it was. modeApply records each op in the shard's feed;
	// modeBuilt empties the feed and sets its floor to to.
	apply(ctx context.Context, f cluster.Fence, d *viewDef, shard int, ops []rowOp, mode applyMode, to uint64) error
	// ids lists the ids of view's rows of shard.
	ids(ctx context.Context, d *viewDef, shard int) ([]string, error)
	// scan reads each of shards' first rows in query qi's index between
	// the bounds s gives, at most s.limit+1 each, leaving out the entries
	// made after the shard's snapshot position (snapshots[i]; -1: now),
	// and returns each shard's position read with them.
	scan(ctx context.Context, d *viewDef, qi int, s bounds, shards []int, snapshots []int64) ([]shardRows, error)
	// feed reads each shard's feed after its position in after (one per
	// shard, every shard), at most limit changes each.
	feed(ctx context.Context, d *viewDef, after []uint64, limit int) ([]shardFeed, error)
	// generation is the generation of view that answers its queries
	// (zero: none was named yet); setGeneration names next, if the one
	// named is still prev (swapped is false otherwise).
	generation(ctx context.Context, view string) (generation, error)
	setGeneration(ctx context.Context, view string, prev, next generation) (swapped bool, err error)
	// sealKey is the key page tokens and stream cursors are sealed with,
	// the same for every instance on the store, kept across restarts.
	sealKey(ctx context.Context) ([]byte, error)
}

type applyMode string

const (
	modeApply applyMode = "apply"
	modeBuild applyMode = "build"
	modeBuilt applyMode = "built"
)

// bounds are an index range: lo and hi in ZRANGEBYLEX's form ("[k"
// inclusive, "(k" exclusive), read from hi down when desc.
type bounds struct {
	lo, hi string
	desc   bool
	limit  int
}

// entry is an index entry read with its row.
type entry struct {
	key, id string
	row     []byte
}

// shardRows is one shard's part of a scan.
type shardRows struct {
	pos  uint64
	rows []entry
}

// below reports whether key is under the lower bound lo.
func below(key, lo string) bool {
	c := strings.Compare(key, lo[1:])
	return c < 0 || c == 0 && lo[0] == '('
}

// aboveHi reports whether key is over the upper bound hi.
func aboveHi(key, hi string) bool {
	c := strings.Compare(key, hi[1:])
	return c > 0 || c == 0 && hi[0] == '('
}
