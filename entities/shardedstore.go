package entities

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/internal/tracing"
)

// ErrFenced is wrapped by the writes of a [FencedStore] that the shard's
// fence refused: the writer's fence (incarnation, epoch) is no longer the
// shard's, another instance owns it now (or nobody does), and nothing was
// written. The writer must drop what it holds of the shard's entities.
var ErrFenced = errors.New("fenced: this instance no longer owns the entity's shard")

// FencedStore is a [Store] whose writes carry the fence of the entity's
// shard ([cluster.ShardOf]) and are refused, atomically, with [ErrFenced]
// when it is no longer the shard's. An entity type started with a
// [Host.Cluster] writes through it; reads need no fence.
type FencedStore interface {
	Store
	// SaveFenced is Save under f: it writes only if f is still the
	// shard's fence and the stored revision is expected.
	SaveFenced(ctx context.Context, f Fence, entityType, id string, data []byte, expected uint64) (uint64, error)
	// DeleteFenced is Delete under f.
	DeleteFenced(ctx context.Context, f Fence, entityType, id string, expected uint64) error
}

// ShardedRedisStore is the [FencedStore] of a cluster of instances on one
// Redis or Redis Cluster: every entity's state lives in the slot of its
// shard's record, so one script checks the fence, checks the revision and
// writes.
//
// # Key layout
//
//	<prefix>:entity:{<shard tag>}:<len(type)>:<type>:<id>  hash: data, rev (decimal)
//	<prefix>:entity:{<shard tag>}:revs                     the shard's revision counter (decimal)
//	<prefix>:entity:{<shard tag>}:changes                  the shard's change log (a stream; see [ChangeLog])
//	<prefix>:entity:{<shard tag>}:changes:seq              its change counter (decimal)
//	<prefix>:entity:{<shard tag>}:changes:checkpoints      hash: consumer → its checkpoint (decimal)
//
// with the shard tag of [cluster.ShardTag] (the record is
// [cluster.ShardRecordKey], in the same slot). "revs" cannot be an
// entity's key: those go on with a length and a ':'.
//
// Revisions are drawn from the shard's counter (INCR in the write's own
// script), not counted per entity, so a delete leaves nothing behind: no
// tombstone, and the entity's next create still gets a revision above
// any it had (no ABA). The cost is one key per shard, 256 in all.
//
// # Upgrade from RedisStore's layout
//
// Load reads the new key and the legacy one in one round trip, and takes
// the legacy one when the new key is absent
// (<prefix>:entity:<len(type)>:<type>:<id>, a tombstone read as absent).
// A write that finds the new key absent checks the legacy key, writes the
// new key with a revision above the legacy one, and then deletes the
// legacy key (another command: on a cluster it is in another slot). Every
// delete deletes the legacy key as well, so a crash between the two steps
// never brings a legacy state back. An entity's writes skip the check
// and the delete when its load found no legacy key (legacyNote): a create
// is then one round trip. Old instances writing the legacy
// layout at the same time are not supported: upgrade every instance first.
//
// Save and Delete without a fence refuse with ErrFenced: writes go through
// SaveFenced and DeleteFenced.
type ShardedRedisStore struct {
	client  redis.UniversalClient
	keys    keyspace.Space
	shards  *[cluster.NumShards]shardKeySet // each shard's keys, made once
	journal *journalSpace                   // the journals' keys: the same layout as legacy's, so its table
	legacy  *RedisStore                     // the layout before shards, for the upgrade path
	batch   *store.Batcher                  // the writes (legacy's: one for both layouts)
	limit   int                             // the change log's bound per shard
	watches watchers
}

var (
	_ FencedStore  = (*ShardedRedisStore)(nil)
	_ AppliedStore = (*ShardedRedisStore)(nil)
)

// NewShardedRedisStore returns a ShardedRedisStore over client whose keys
// start with prefix ([DefaultRedisPrefix] when empty); the cluster's
// members must use the same prefix. It panics on a bad prefix, as
// [NewRedisStore] does.
func NewShardedRedisStore(client redis.UniversalClient, prefix string) *ShardedRedisStore {
	keys := keyspace.Must(prefix)
	shards := new([cluster.NumShards]shardKeySet)
	for shard := range shards {
		tag := cluster.ShardTag(shard)
		shards[shard] = shardKeySet{
			record:      cluster.ShardRecordKey(keys, shard),
			entity:      keys.Tagged("entity", tag, ""),
			revs:        keys.Tagged("entity", tag, "revs"),
			checkpoints: keys.Tagged("entity", tag, "changes:checkpoints"),
			changeSeq:   keys.Tagged("entity", tag, "changes:seq"),
			changes:     keys.Tagged("entity", tag, "changes"),
		}
	}
	legacy := NewRedisStore(client, prefix)
	return &ShardedRedisStore{client: client, keys: keys, shards: shards, journal: legacy.journal, legacy: legacy,
		batch: legacy.batch, limit: DefaultChangeLogLimit}
}

// shardKeySet is one shard's keys (see the layout above); entity is the
// start of its entities' keys, up to the length of the type.
type shardKeySet struct {
	record, entity, revs, checkpoints, changeSeq, changes string
}

// shardKeys are the keys a write of one entity touches, all in its
// shard's slot: the record, the state, the revision counter and the
// change keys (changeKeys).
func (s *ShardedRedisStore) shardKeys(shard int, entityType, id string) []string {
	k := &s.shards[shard]
	return []string{k.record, s.stateKeyIn(shard, entityType, id), k.revs, k.checkpoints, k.changeSeq, k.changes}
}

// StateKey is the key of the hash that holds an entity's state (fields
// data and rev, a decimal revision), in the layout above: for a tool
// that reads states, or restores them, directly.
func (s *ShardedRedisStore) StateKey(entityType, id string) string { return s.stateKey(entityType, id) }

// stateKey is the new layout's key of an entity.
func (s *ShardedRedisStore) stateKey(entityType, id string) string {
	return s.stateKeyIn(cluster.ShardOf(entityType, id), entityType, id)
}

// stateKeyIn is the key of an entity of shard.
func (s *ShardedRedisStore) stateKeyIn(shard int, entityType, id string) string {
	return s.shards[shard].entity + strconv.Itoa(len(entityType)) + ":" + entityType + ":" + id
}

//go:embed shardedcounter.lua
var counterLua string

//go:embed shardedsave.lua
var shardedSaveLua string

//go:embed shardeddelete.lua
var shardedDeleteLua string

//go:embed shardedchange.lua
var changeLua string

//go:embed applied.lua
var appliedLua string

//go:embed record.lua
var recordLua string

var (
	shardedSave   = cluster.FencedScript(counterLua + "\n" + changeLua + "\n" + appliedLua + "\n" + shardedSaveLua)
	shardedDelete = cluster.FencedScript(counterLua + "\n" + changeLua + "\n" + appliedLua + "\n" + shardedDeleteLua)
	// recordScript serves both stores' layouts.
	recordScript = redis.NewScript(appliedLua + "\n" + recordLua)
)

// The first value of the scripts' replies.
const (
	scriptFenced   = 0
	scriptDone     = 1
	scriptConflict = 2
	scriptAbsent   = 3 // absent here: the caller checks the legacy key
	scriptApplied  = 4 // the write's applied record is kept already: nothing written
)

// Load implements [Store]: the new key, else the legacy one, both read in
// one round trip (a pipeline).
func (s *ShardedRedisStore) Load(ctx context.Context, entityType, id string) (Record, error) {
	key, legacyKey := s.stateKey(entityType, id), s.legacy.key(entityType, id)
	pipe := s.client.Pipeline()
	current := pipe.HMGet(ctx, key, "data", "rev")
	legacy := pipe.HMGet(ctx, legacyKey, "data", "rev", "gone")
	if _, err := pipe.Exec(ctx); err != nil {
		return Record{}, redisErr("load", entityType, id, err)
	}
	rec, err := parseHash(key, current.Val())
	if err != nil {
		return Record{}, redisErr("load", entityType, id, err)
	}
	legacyVals := legacy.Val()
	if len(legacyVals) != 3 {
		return Record{}, redisErr("load", entityType, id, fmt.Errorf("HMGET returned %d values, want 3", len(legacyVals)))
	}
	if note := legacyNoteIn(ctx); note != nil {
		gone, _ := legacyVals[2].(string)
		*note = legacyNote{known: legacyVals[1] == nil, floor: gone}
	}
	if rec.Revision != 0 {
		return rec, nil
	}
	if rec, err = parseHash(legacyKey, legacyVals[:2]); err != nil {
		return Record{}, redisErr("load", entityType, id, err)
	}
	return rec, nil
}

// Revision implements [Store] through Load.
func (s *ShardedRedisStore) Revision(ctx context.Context, entityType, id string) (uint64, error) {
	rec, err := s.Load(ctx, entityType, id)
	if err != nil {
		return 0, fmt.Errorf("revision: %w", err)
	}
	return rec.Revision, nil
}

// Save refuses: a ShardedRedisStore writes only under a fence.
func (s *ShardedRedisStore) Save(_ context.Context, entityType, id string, _ []byte, _ uint64) (uint64, error) {
	return 0, opErr("save", entityType, id, fmt.Errorf("no fence given (use SaveFenced): %w", ErrFenced))
}

// Delete refuses: a ShardedRedisStore writes only under a fence.
func (s *ShardedRedisStore) Delete(_ context.Context, entityType, id string, _ uint64) error {
	return opErr("delete", entityType, id, fmt.Errorf("no fence given (use DeleteFenced): %w", ErrFenced))
}

// Ping implements [Store].
func (s *ShardedRedisStore) Ping(ctx context.Context) error { return s.legacy.Ping(ctx) }

// Record implements [AppliedStore] on the new layout's key, unfenced: the
// revision check is what makes it safe. A state still under the legacy
// key is checked there first, then the record goes to the new key.
func (s *ShardedRedisStore) Record(ctx context.Context, entityType, id string, expected uint64, a Applied) error {
	key := s.stateKey(entityType, id)
	found, err := runRecord(ctx, s.client, key, entityType, id, expected, a)
	if err == nil || !errors.Is(err, ErrConflict) || found != 0 {
		return err
	}
	if _, err := s.legacyFloor(ctx, "record", entityType, id, expected); err != nil {
		return err
	}
	_, err = runRecord(ctx, s.client, key, entityType, id, 0, a)
	return err
}

// runRecord runs recordScript on the entity's hash at key; on a conflict
// it returns the revision found.
func runRecord(ctx context.Context, client redis.UniversalClient, key, entityType, id string, expected uint64, a Applied) (uint64, error) {
	const op = "record"
	args := appendApplied([]any{strconv.FormatUint(expected, 10)}, &a)
	res, err := recordScript.Run(ctx, client, []string{key}, args...).Slice()
	if err != nil {
		return 0, redisWriteErr(client, op, entityType, id, err)
	}
	if len(res) != 2 {
		return 0, opErr(op, entityType, id, fmt.Errorf("unexpected reply %v", res))
	}
	code, _ := res[0].(int64)
	switch code {
	case scriptApplied:
		return 0, alreadyApplied(op, entityType, id, res[1])
	case scriptDone:
		return 0, nil
	}
	text, _ := res[1].(string)
	found, err := parseRevision(text)
	if code != scriptConflict || err != nil {
		return 0, opErr(op, entityType, id, fmt.Errorf("unexpected reply %v", res))
	}
	return found, conflictErr(op, entityType, id, expected, found)
}

// SaveFenced implements [FencedStore]: one script in the common case; a
// create also reads the legacy key first (unless the entity's load read
// it: legacyNote), and a write over a legacy key deletes it after.
func (s *ShardedRedisStore) SaveFenced(ctx context.Context, f Fence, entityType, id string, data []byte, expected uint64) (uint64, error) {
	return s.write(ctx, "save", shardedSave, f, entityType, id, data, expected)
}

// DeleteFenced implements [FencedStore]: the script, then the legacy key
// (unless the entity's load found none: legacyNote).
func (s *ShardedRedisStore) DeleteFenced(ctx context.Context, f Fence, entityType, id string, expected uint64) error {
	_, err := s.write(ctx, "delete", shardedDelete, f, entityType, id, nil, expected)
	return err
}

// write runs a fenced save or delete script, going through the legacy key
// when the new one is absent: before a create or a delete of an absent
// state (a live legacy state would be a conflict), or when the script
// found the new key absent but a revision was expected (a legacy state).
// Every delete, and every write over a legacy key, deletes it after. The
// legacyNote ctx carries, when its entity's load filled it in, stands for
// the read before a create, and says when there is no legacy key to
// delete; once the write is done, the note says there is none.
func (s *ShardedRedisStore) write(ctx context.Context, op string, script *redis.Script, f Fence,
	entityType, id string, data []byte, expected uint64) (uint64, error) {
	keys, err := s.fencedKeys(f, entityType, id)
	if err != nil {
		return 0, opErr(op, entityType, id, err)
	}
	note := legacyNoteIn(ctx)
	known := note != nil && note.known // the entity's load read the legacy key: no need to again
	floor := ""
	if expected == 0 {
		if known {
			floor = note.floor
		} else if floor, err = s.legacyFloor(ctx, op, entityType, id, expected); err != nil {
			return 0, err
		}
	}
	traceCtx := tracing.CaptureForLink(ctx)
	r, err := s.run(ctx, script, keys, f, entityType, id, expected, data, floor, traceCtx)
	if err == nil && r.code == scriptAbsent {
		if floor, err = s.legacyFloor(ctx, op, entityType, id, expected); err != nil {
			return 0, err
		}
		r, err = s.run(ctx, script, keys, f, entityType, id, 0, data, floor, traceCtx)
	}
	if err != nil {
		return 0, redisWriteErr(s.client, op, entityType, id, err)
	}
	switch r.code {
	case scriptApplied:
		return 0, alreadyApplied(op, entityType, id, r.answer)
	case scriptFenced:
		return 0, opErr(op, entityType, id, fmt.Errorf("refused by the fence of shard %d (epoch %d): %w", f.Shard, f.Epoch, ErrFenced))
	case scriptConflict:
		return 0, conflictErr(op, entityType, id, expected, r.rev)
	case scriptDone:
	default:
		return 0, opErr(op, entityType, id, fmt.Errorf("unexpected script code %d", r.code))
	}
	if r.seq != 0 {
		c := Change{Seq: r.seq, EntityType: entityType, EntityID: id, Revision: r.rev, Deleted: script == shardedDelete, At: r.at,
			TraceContext: traceCtx}
		if !c.Deleted {
			c.Data = cloneData(data)
		}
		s.watches.notify(f.Shard, c)
	}
	if floor != "" || (script == shardedDelete && !(known && note.floor == "")) {
		if err := s.client.Del(ctx, s.legacy.key(entityType, id)).Err(); err != nil {
			// The write is done: "nothing changed" would be false.
			return 0, redisWriteErr(s.client, op+" (delete the legacy key)", entityType, id, err)
		}
	}
	if note != nil {
		*note = legacyNote{known: true} // deleted, or there was none
	}
	return r.rev, nil
}

// fencedKeys are the keys of a fenced write, once f is checked to be the
// fence of the entity's shard.
func (s *ShardedRedisStore) fencedKeys(f Fence, entityType, id string) ([]string, error) {
	shard := cluster.ShardOf(entityType, id)
	if f.Shard != shard || f.Incarnation == "" {
		return nil, fmt.Errorf("the fence is of shard %d (incarnation %q), the entity is in shard %d: %w",
			f.Shard, f.Incarnation, shard, ErrFenced)
	}
	return s.shardKeys(shard, entityType, id), nil
}

// legacyFloor reads the legacy key and returns the floor a write over it
// raises the shard's counter to: its live or tombstone revision, in
// decimal, or "" when there is no legacy key. A legacy revision that is
// not expected is a conflict.
func (s *ShardedRedisStore) legacyFloor(ctx context.Context, op, entityType, id string, expected uint64) (string, error) {
	vals, err := s.client.HMGet(ctx, s.legacy.key(entityType, id), "rev", "gone").Result()
	if err != nil {
		return "", redisErr(op, entityType, id, fmt.Errorf("read the legacy key: %w", err))
	}
	live, _ := vals[0].(string)
	gone, _ := vals[1].(string)
	found := uint64(0)
	if live != "" {
		if found, err = parseRevision(live); err != nil {
			return "", redisErr(op, entityType, id, fmt.Errorf("read the legacy key: %w", err))
		}
	}
	if found != expected {
		return "", conflictErr(op, entityType, id, expected, found)
	}
	if live != "" {
		return live, nil
	}
	return gone, nil
}

// scriptReply is a fenced write script's reply: its code, the revision,
// and the change's seq and time when the write was recorded in the log
// (seq 0 when not).
type scriptReply struct {
	code   int64
	rev    uint64
	seq    uint64
	at     time.Time
	answer any // with scriptApplied: the first answer
}

// run runs a fenced script, with the write's trace context
// (tracing.Capture's form) for the change it logs, and decodes its
// {code, revision[, seq, at]} reply.
func (s *ShardedRedisStore) run(ctx context.Context, script *redis.Script, keys []string, f Fence,
	entityType, id string, expected uint64, data []byte, floor, traceCtx string) (scriptReply, error) {
	// The fence (2), the revision, the data, 5 more and the applied record (3).
	args := append(f.AppendArgs(make([]any, 0, 12)), strconv.FormatUint(expected, 10))
	if script == shardedSave {
		args = append(args, data)
	}
	args = append(args, floor, entityType, id, s.limit, traceCtx)
	args = appendApplied(args, appliedIn(ctx))
	res, err := s.batch.Run(ctx, script, keys, args...).Slice()
	if err != nil {
		return scriptReply{}, err
	}
	bad := func() (scriptReply, error) { return scriptReply{}, fmt.Errorf("unexpected reply %v", res) }
	if len(res) != 2 && len(res) != 4 {
		return bad()
	}
	code, isInt := res[0].(int64)
	revText, isString := res[1].(string)
	if !isInt || !isString {
		return bad()
	}
	if code == scriptFenced {
		return scriptReply{code: code}, nil
	}
	if code == scriptApplied {
		return scriptReply{code: code, answer: res[1]}, nil
	}
	r := scriptReply{code: code}
	if r.rev, err = parseRevision(revText); err != nil {
		return scriptReply{}, err
	}
	if len(res) == 4 {
		var ok bool
		if r.seq, r.at, ok = parseChangeStamp(res[2], res[3]); !ok {
			return bad()
		}
	}
	return r, nil
}

// parseChangeStamp reads a recorded change's seq and time as record_change
// returns them (decimal strings; the time in microseconds).
func parseChangeStamp(seqReply, atReply any) (seq uint64, at time.Time, ok bool) {
	seqText, _ := seqReply.(string)
	atText, _ := atReply.(string)
	us, atErr := strconv.ParseInt(atText, 10, 64)
	seq, err := parseRevision(seqText)
	if err != nil || atErr != nil {
		return 0, time.Time{}, false
	}
	return seq, time.UnixMicro(us), true
}
