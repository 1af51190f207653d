package entities

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisPrefix is the key prefix [NewRedisStore] uses when given "".
const DefaultRedisPrefix = "trellis"

// RedisStore is a [Store] in Redis: durable as far as the Redis server is,
// and shared by every server instance that points at the same Redis and
// prefix, which is what makes the revision check matter.
//
// # Key layout
//
//	<prefix>:entity-revision                  string: the last revision handed out (INCR)
//	<prefix>:entity:<len(type)>:<type>:<id>   hash: data (the JSON document), rev (decimal)
//
// len(type) is the entity type's length in bytes, in decimal. Entity types
// and ids may contain any byte, ':' included; the length says where the type
// ends and the id is the rest, so type "a:b" id "c" (…:entity:3:a:b:c) and
// type "a" id "b:c" (…:entity:1:a:b:c) are different keys. Document keys
// start with "<prefix>:entity:", so they never collide with the counter.
//
// Revisions come from the one counter key, so they are unique across the
// whole store and only grow, even across a delete and re-create. Each
// check-then-write runs as one Lua script, so no other client can write
// between the check and the write.
//
// # Redis Cluster
//
// The scripts touch a document and the counter together, so in a cluster
// all of a store's keys must be in one hash slot: give a prefix that is a
// hash tag, such as "{trellis}". The first "{…}" in a key picks its slot and
// the prefix comes first, so the braces in entity types or ids do not
// matter. (All of one store's state then lives on one shard: the price of a
// store-wide revision counter.)
type RedisStore struct {
	client  redis.UniversalClient
	prefix  string
	counter string // <prefix>:entity-revision
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a RedisStore over client whose keys start with
// prefix ([DefaultRedisPrefix] when empty). Stores that share a Redis and a
// prefix share their documents. The caller keeps ownership of client (and
// closes it).
func NewRedisStore(client redis.UniversalClient, prefix string) *RedisStore {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return &RedisStore{
		client:  client,
		prefix:  prefix,
		counter: prefix + ":entity-revision",
	}
}

// key returns the hash key of a document; see the layout on [RedisStore].
func (s *RedisStore) key(entityType, id string) string {
	return s.prefix + ":entity:" + strconv.Itoa(len(entityType)) + ":" + entityType + ":" + id
}

// Revisions cross the Lua boundary as decimal strings, never as Lua numbers:
// those are doubles, exact only up to 2^53, and Redis may format them in
// exponent notation. The scripts compare revisions as strings and read the
// new one back with GET after INCR for the same reason.
//
// Both scripts return {1, revision} on success and {0, found revision} when
// the stored revision is not the expected one.
var (
	// saveIfRevision: KEYS[1] document, KEYS[2] counter;
	// ARGV[1] expected revision ("0": absent), ARGV[2] data.
	saveIfRevision = redis.NewScript(`
local found = redis.call('HGET', KEYS[1], 'rev') or '0'
if found ~= ARGV[1] then
	return {0, found}
end
redis.call('INCR', KEYS[2])
local rev = redis.call('GET', KEYS[2])
redis.call('HSET', KEYS[1], 'data', ARGV[2], 'rev', rev)
return {1, rev}
`)

	// deleteIfRevision: KEYS[1] document; ARGV[1] expected revision.
	deleteIfRevision = redis.NewScript(`
local found = redis.call('HGET', KEYS[1], 'rev') or '0'
if found ~= ARGV[1] then
	return {0, found}
end
redis.call('DEL', KEYS[1])
return {1, found}
`)
)

// Load implements [Store] with one HMGET.
func (s *RedisStore) Load(ctx context.Context, entityType, id string) (Record, error) {
	vals, err := s.client.HMGet(ctx, s.key(entityType, id), "data", "rev").Result()
	if err != nil {
		return Record{}, opErr("load", entityType, id, err)
	}
	if len(vals) != 2 {
		return Record{}, opErr("load", entityType, id, fmt.Errorf("HMGET returned %d values, want 2", len(vals)))
	}
	if vals[0] == nil && vals[1] == nil {
		return Record{}, nil
	}
	data, ok1 := vals[0].(string)
	revText, ok2 := vals[1].(string)
	if !ok1 || !ok2 {
		// Only the scripts write these hashes, and always both fields.
		return Record{}, opErr("load", entityType, id,
			fmt.Errorf("corrupt document at %s: data %T, rev %T", s.key(entityType, id), vals[0], vals[1]))
	}
	rev, err := parseRevision(revText)
	if err != nil {
		return Record{}, opErr("load", entityType, id, err)
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
		return 0, opErr("revision", entityType, id, err)
	}
	rev, err := parseRevision(revText)
	if err != nil {
		return 0, opErr("revision", entityType, id, err)
	}
	return rev, nil
}

// Save implements [Store] with the saveIfRevision script.
func (s *RedisStore) Save(ctx context.Context, entityType, id string, data []byte, expected uint64) (uint64, error) {
	// go-redis writes data to the connection before Run returns, so the
	// caller may reuse the buffer afterwards.
	res, err := saveIfRevision.Run(ctx, s.client,
		[]string{s.key(entityType, id), s.counter},
		strconv.FormatUint(expected, 10), data).Slice()
	if err != nil {
		return 0, opErr("save", entityType, id, err)
	}
	ok, rev, err := parseScriptResult(res)
	if err != nil {
		return 0, opErr("save", entityType, id, fmt.Errorf("saveIfRevision: %w", err))
	}
	if !ok {
		return 0, conflictErr("save", entityType, id, expected, rev)
	}
	return rev, nil
}

// Delete implements [Store] with the deleteIfRevision script.
func (s *RedisStore) Delete(ctx context.Context, entityType, id string, expected uint64) error {
	res, err := deleteIfRevision.Run(ctx, s.client,
		[]string{s.key(entityType, id)},
		strconv.FormatUint(expected, 10)).Slice()
	if err != nil {
		return opErr("delete", entityType, id, err)
	}
	ok, found, err := parseScriptResult(res)
	if err != nil {
		return opErr("delete", entityType, id, fmt.Errorf("deleteIfRevision: %w", err))
	}
	if !ok {
		return conflictErr("delete", entityType, id, expected, found)
	}
	return nil
}

// Ping implements [Store] with PING.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
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
