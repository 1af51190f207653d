package views

// Each view keeps, per shard and with its rows, a feed: the changes its
// projector made to the rows, in the order of their positions, written in
// the same atomic step as the rows. A stream (follow.go) reads the feeds
// of every shard after its cursor, and tells a query's follower which row
// entered, changed in or left the result.
//
// A feed keeps the changes of the last feedWindow positions of its shard
// (the shard's changes of every entity type count): its floor is the
// position after which it lacks none. A build of the shard's rows (a new
// view, or one behind the change log's bound) is no change the feed can
// tell: it empties the feed and moves the floor to the position built.

// feedWindow is how many positions of its shard a feed covers.
const feedWindow = 10_000

// rowChange is one change to a row as a feed keeps it: the row's index
// key in each query before (old; "" when it had no row) and after (new;
// "" when it has none), and the row after.
type rowChange struct {
	seq      uint64
	id       string
	row      []byte
	old, new []string
}

// shardFeed is a shard's feed read after a position: the shard's view
// position and floor read with it, and its changes (at most the limit
// asked).
type shardFeed struct {
	pos, floor uint64
	changes    []rowChange
}

// feedKind is what change c (of the feed of view d) does to the rows of
// query qi's result s: "added", "changed", "removed" or "" (none).
func feedKind(c rowChange, qi int, s *scan) string {
	in := func(keys []string) bool {
		return qi < len(keys) && keys[qi] != "" && !below(keys[qi], s.lo) && !aboveHi(keys[qi], s.hi)
	}
	was, is := in(c.old), in(c.new)
	switch {
	case was && is:
		return "changed"
	case is:
		return "added"
	case was:
		return "removed"
	}
	return ""
}
