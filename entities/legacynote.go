package entities

import "context"

// legacyNote is what an entity's load learned of its key in the layout
// before shards (see ShardedRedisStore's upgrade path), so that its
// writes need not read that key again: a create would otherwise read it
// first, one more round trip, to find a live state there (a conflict)
// and the revision a tombstone left (the floor of the create's revision).
//
// The note holds while the entity holds the state it loaded: nothing
// writes the legacy layout while instances in the cluster mode run (the
// upgrade path requires it), so a legacy key found without a live state
// stays so, and the store's own writes only delete it.
type legacyNote struct {
	// known: the load found no live state under the legacy key; floor is
	// then its tombstone's revision in decimal, "" when there is no legacy
	// key at all.
	known bool
	floor string
}

// legacyNoteKey is ctx's key of an entity's legacyNote.
type legacyNoteKey struct{}

// withLegacyNote makes ctx carry n, which ShardedRedisStore's Load fills
// in and its writes read (and clear once they deleted the legacy key).
// Other stores ignore it.
func withLegacyNote(ctx context.Context, n *legacyNote) context.Context {
	return context.WithValue(ctx, legacyNoteKey{}, n)
}

// legacyNoteIn is the note ctx carries, or nil.
func legacyNoteIn(ctx context.Context) *legacyNote {
	n, _ := ctx.Value(legacyNoteKey{}).(*legacyNote)
	return n
}
