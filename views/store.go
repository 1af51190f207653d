package views

import (
	"context"
	"strings"

	"github.com/trellis-go/trellis/internal/cluster"
)

const numShards = cluster.NumShards

// Store keeps views' rows, their index entries and the position of the
// last change applied, per view and shard: NewMemoryStore (the embedded
// store's) or NewRedisStore (Redis and Redis Cluster, each view's keys in
// one slot).
type Store interface {
	// position is the last change applied to the rows of shard of view
	// (a generation's key: viewDef.gen); built
	// is false when the shard's rows were never built.
	position(ctx context.Context, view string, shard int) (pos uint64, built bool, err error)
	// positions is every shard's position of view (0: never built), by
	// shard, read together.
	positions(ctx context.Context, view string) ([]uint64, error)
	// builtShards is how many shards of view (a generation's key) were
	// built.
	builtShards(ctx context.Context, view string) (int, error)
	// open is position for the projector of shard under f: from then on,
	// apply refuses the batches of an owner of the shard with a lower
	// epoch than f's (with entities.ErrFenced; an empty fence is not
	// checked), and open refuses f when a higher one opened it.
	open(ctx context.Context, f cluster.Fence, d *viewDef, shard int) (pos uint64, built bool, err error)
	// apply applies ops, in order, in one atomic step, under f (see open),
	// and per mode: modeApply sets the position to to, and
	// is a no-op when the position is at to or after already (a replay);
	// modeBuild leaves the position as it is; modeBuilt sets it to to,
	// whatever it was. modeApply records each op in the shard's feed;
	// modeBuilt empties the feed and sets its floor to to. Each call
	// counts one more on the view's write counter, and the index entries
	// it makes are marked with it.
	apply(ctx context.Context, f cluster.Fence, d *viewDef, shard int, ops []rowOp, mode applyMode, to uint64) error
	// rows reads the rows of ids (JSON; an id with none is left out).
	rows(ctx context.Context, d *viewDef, ids []string) (map[string][]byte, error)
	// ids lists the ids of view's rows of shard.
	ids(ctx context.Context, d *viewDef, shard int) ([]string, error)
	// scan reads the first rows in query qi's index between the bounds b
	// gives, at most b.limit+1, leaving out the entries made after the
	// write counter's snapshot (-1: now), and returns the snapshot read
	// with them and, if positions, every shard's position read with them.
	scan(ctx context.Context, d *viewDef, qi int, b bounds, snapshot int64, positions bool) (scanned, error)
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

// scanned is a scan's result: the write counter's snapshot it was read
// at, each shard's position (when asked), and the rows.
type scanned struct {
	seq  uint64
	pos  []uint64
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
