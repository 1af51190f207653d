package entities

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/store"
)

// DefaultRedisPrefix is the key prefix [NewRedisStore] uses when given "".
const DefaultRedisPrefix = "trellis"

// RedisStore is a [Store] in Redis: durable as far as the Redis server is,
// and shared by every server instance that points at the same Redis (or
// Redis Cluster) and prefix, which is what makes the revision check
// matter.
//
// # Key layout
//
//	<prefix>:entity:<len(type)>:<type>:<id>   hash: data (the JSON document), rev (decimal)
//	                                          or, once deleted: gone (the last revision)
//
// len(type) is the entity type's length in bytes, in decimal. Entity types
// and ids may contain any byte, ':' included; the length says where the type
// ends and the id is the rest, so type "a:b" id "c" (…:entity:3:a:b:c) and
// type "a" id "b:c" (…:entity:1:a:b:c) are different keys.
//
// One key per entity and nothing else: every operation touches that key
// alone, so on a Redis Cluster each entity lives in the slot of its own
// key and the entities spread over every master (the prefix holds no
// hash tag; see package keyspace).
//
// Revisions count per entity: a save writes the stored revision plus one.
// A delete leaves a tombstone, the hash with only "gone", the revision the
// document had; the next create continues from it. So a revision is never
// given twice to one entity, not even across a delete and a re-create (no
// ABA), at the price of a few dozen bytes per deleted entity that Redis
// keeps. Each check-then-write runs as one Lua script, so no other client
// can write between the check and the write.
type RedisStore struct {
	client  redis.UniversalClient
	keys    keyspace.Space
	journal *journalSpace
	batch   *store.Batcher // the writes
}

var _ AppliedStore = (*RedisStore)(nil)

// batchSlots is how many pipelines of writes a store has in flight at
// most; the writes that come while all are in flight go together in the
// next (store.Batcher).
const batchSlots = 4

// NewRedisStore returns a RedisStore over client whose keys start with
// prefix ([DefaultRedisPrefix] when empty). Stores that share a Redis and a
// prefix share their documents. The caller keeps ownership of client (and
// closes it). It panics on a prefix [keyspace.CheckPrefix] refuses, as
// regexp.MustCompile does on a bad pattern: a prefix that comes from input
// is checked when the input is (the server's configuration does).
func NewRedisStore(client redis.UniversalClient, prefix string) *RedisStore {
	keys := keyspace.Must(prefix)
	return &RedisStore{client: client, keys: keys, journal: newJournalSpace(keys), batch: store.NewBatcher(client, batchSlots, 0)}
}

// key returns the hash key of a document; see the layout on [RedisStore].
func (s *RedisStore) key(entityType, id string) string {
	return s.keys.Key("entity", strconv.Itoa(len(entityType))+":"+entityType+":"+id)
}

// Revisions cross the Lua boundary as decimal strings, never as Lua numbers:
// those are doubles, exact only up to 2^53, and Redis may format them in
// exponent notation. The scripts compare revisions as strings and add one
// digit by digit for the same reason.
//
// Both scripts return {1, revision} on success and {0, found revision} when
// the stored revision is not the expected one.
var (
	// saveIfRevision: KEYS[1] document; ARGV[1] expected revision ("0":
	// absent), ARGV[2] data, ARGV[3..5] the applied record (appendApplied;
	// {2, first answer} when it is kept already). The new revision is one more than the live
	// document's, or than the tombstone's, or 1.
	saveIfRevision = redis.NewScript(appliedLua + `
local now, first = applied_first(KEYS[1], ARGV[3])
if first then return {2, first} end
local found = redis.call('HGET', KEYS[1], 'rev') or '0'
if found ~= ARGV[1] then
	return {0, found}
end
local last = found
if last == '0' then last = redis.call('HGET', KEYS[1], 'gone') or '0' end
local i = #last
while i > 0 and string.sub(last, i, i) == '9' do i = i - 1 end
local rev
if i == 0 then
	rev = '1' .. string.rep('0', #last)
else
	rev = string.sub(last, 1, i - 1) .. string.char(string.byte(last, i) + 1) .. string.rep('0', #last - i)
end
if #rev > 20 or (#rev == 20 and rev > '18446744073709551615') then
	return redis.error_reply('revision ' .. last .. ' is the last a uint64 holds')
end
redis.call('HDEL', KEYS[1], 'gone')
if found == '0' then redis.call('PERSIST', KEYS[1]) end
redis.call('HSET', KEYS[1], 'data', ARGV[2], 'rev', rev)
if now then applied_record(KEYS[1], ARGV[3], ARGV[4], ARGV[5], now) end
return {1, rev}
`)

	// deleteIfRevision: KEYS[1] document; ARGV[1] expected revision,
	// ARGV[2..4] the applied record, as saveIfRevision's.
	// Replaces a live document by its tombstone; an absent one stays as
	// it is.
	deleteIfRevision = redis.NewScript(appliedLua + `
local now, first = applied_first(KEYS[1], ARGV[2])
if first then return {2, first} end
local found = redis.call('HGET', KEYS[1], 'rev') or '0'
if found ~= ARGV[1] then
	return {0, found}
end
if found ~= '0' then
	redis.call('HDEL', KEYS[1], 'data', 'rev')
	redis.call('HSET', KEYS[1], 'gone', found)
end
if now then
	applied_record(KEYS[1], ARGV[2], ARGV[3], ARGV[4], now)
	if found == '0' and redis.call('HEXISTS', KEYS[1], 'gone') == 0 then applied_linger(KEYS[1], now) end
end
return {1, found}
`)
)

// Load implements [Store] with one HMGET.
func (s *RedisStore) Load(ctx context.Context, entityType, id string) (Record, error) {
	rec, err := loadHash(ctx, s.client, s.key(entityType, id))
	if err != nil {
		return Record{}, redisErr("load", entityType, id, err)
	}
	return rec, nil
}

// loadHash reads the document hash at key with one HMGET: (nil, 0) when
// it is absent or a tombstone (a hash without data and rev).
func loadHash(ctx context.Context, client redis.UniversalClient, key string) (Record, error) {
	vals, err := client.HMGet(ctx, key, "data", "rev").Result()
	if err != nil {
		return Record{}, err
	}
	return parseHash(key, vals)
}

// parseHash reads a document hash's HMGET of data and rev (loadHash).
func parseHash(key string, vals []any) (Record, error) {
	if len(vals) != 2 {
		return Record{}, fmt.Errorf("HMGET returned %d values, want 2", len(vals))
	}
	if vals[0] == nil && vals[1] == nil {
		return Record{}, nil // never written, or a tombstone
	}
	data, ok1 := vals[0].(string)
	revText, ok2 := vals[1].(string)
	if !ok1 || !ok2 {
		// Only the scripts write these hashes, and always both fields.
		return Record{}, fmt.Errorf("corrupt document at %s: data %T, rev %T", key, vals[0], vals[1])
	}
	rev, err := parseRevision(revText)
	if err != nil {
		return Record{}, err
	}
	return Record{Data: []byte(data), Revision: rev}, nil
}

// Revision implements [Store] with one HGET.
func (s *RedisStore) Revision(ctx context.Context, entityType, id string) (uint64, error) {
	revText, err := s.client.HGet(ctx, s.key(entityType, id), "rev").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, redisErr("revision", entityType, id, err)
	}
	rev, err := parseRevision(revText)
	if err != nil {
		return 0, redisErr("revision", entityType, id, err)
	}
	return rev, nil
}

// Save implements [Store] with the saveIfRevision script.
func (s *RedisStore) Save(ctx context.Context, entityType, id string, data []byte, expected uint64) (uint64, error) {
	// go-redis writes data to the connection before Run returns, so the
	// caller may reuse the buffer afterwards.
	args := appendApplied([]any{strconv.FormatUint(expected, 10), data}, appliedIn(ctx))
	res, err := s.batch.Run(ctx, saveIfRevision, []string{s.key(entityType, id)}, args...).Slice()
	if err != nil {
		return 0, redisWriteErr(s.client, "save", entityType, id, err)
	}
	if applied(res) {
		return 0, alreadyApplied("save", entityType, id, res[1])
	}
	ok, rev, err := parseScriptResult(res)
	if err != nil {
		return 0, redisErr("save", entityType, id, fmt.Errorf("saveIfRevision: %w", err))
	}
	if !ok {
		return 0, conflictErr("save", entityType, id, expected, rev)
	}
	return rev, nil
}

// Delete implements [Store] with the deleteIfRevision script.
func (s *RedisStore) Delete(ctx context.Context, entityType, id string, expected uint64) error {
	args := appendApplied([]any{strconv.FormatUint(expected, 10)}, appliedIn(ctx))
	res, err := s.batch.Run(ctx, deleteIfRevision, []string{s.key(entityType, id)}, args...).Slice()
	if err != nil {
		return redisWriteErr(s.client, "delete", entityType, id, err)
	}
	if applied(res) {
		return alreadyApplied("delete", entityType, id, res[1])
	}
	ok, found, err := parseScriptResult(res)
	if err != nil {
		return redisErr("delete", entityType, id, fmt.Errorf("deleteIfRevision: %w", err))
	}
	if !ok {
		return conflictErr("delete", entityType, id, expected, found)
	}
	return nil
}

// Record implements [AppliedStore] with the record script.
func (s *RedisStore) Record(ctx context.Context, entityType, id string, expected uint64, a Applied) error {
	_, err := runRecord(ctx, s.client, s.key(entityType, id), entityType, id, expected, a)
	return err
}

// applied reports whether a save or delete script answered {2, answer}:
// its applied record was kept already.
func applied(res []any) bool {
	if len(res) != 2 {
		return false
	}
	flag, _ := res[0].(int64)
	return flag == 2
}

// Ping implements [Store] with PING (on a cluster: to every master, since
// an entity may live on any of them).
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := keyspace.Ping(ctx, s.client); err != nil {
		return fmt.Errorf("ping redis: %w", store.Classify(err))
	}
	return nil
}

// parseScriptResult decodes the {ok, revision} reply of the scripts.
func parseScriptResult(res []any) (ok bool, rev uint64, err error) {
	if len(res) != 2 {
		return false, 0, fmt.Errorf("unexpected reply %v", res)
	}
	flag, isInt := res[0].(int64)
	revText, isString := res[1].(string)
	if !isInt || !isString {
		return false, 0, fmt.Errorf("unexpected reply %v", res)
	}
	rev, err = parseRevision(revText)
	if err != nil {
		return false, 0, err
	}
	return flag == 1, rev, nil
}

func parseRevision(text string) (uint64, error) {
	rev, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("corrupt revision %q: %w", text, err)
	}
	return rev, nil
}

// redisErr is opErr for an error of Redis, marked as
// components.ErrUnavailable when Redis could not serve the call.
func redisErr(op, entityType, id string, err error) error {
	return opErr(op, entityType, id, store.Classify(err))
}

// redisWriteErr is redisErr for a write that client sent: a failure after
// the command was sent is marked components.ErrOutcomeUnknown, since Redis
// may have applied it (see store.ClassifyWriteBy).
func redisWriteErr(client redis.UniversalClient, op, entityType, id string, err error) error {
	return opErr(op, entityType, id, store.ClassifyWriteBy(client, err))
}
