// Package entityhook sets options of an entity type that the platform's
// own components need and entities' public API leaves out, because they
// hold only for records the platform alone writes.
package entityhook

// ExpectNew (package entities sets it) declares that the entities of
// t, an *entities.Type, are absent from the store when they first get a
// command (a workflow's record, created by the command that starts it),
// and that none was ever stored in ShardedRedisStore's legacy layout (the
// platform wrote them only in the cluster mode). A command on such an
// entity that is not in memory runs first on the empty state with no
// read of the store; only a write that proves the entity absent is kept
// (see entities' handle).
var ExpectNew func(t any)
