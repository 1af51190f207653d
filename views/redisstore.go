package views

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/store"
)

// redisStore keeps views in Redis or a Redis Cluster. A view's keys of one
// shard share the shard's hash tag (the slot of its entities and change
// log), so one script writes a row, its index entries and the position:
//
//	<prefix>:view:{<shard tag>}:<len(name)>:<name>:pos     the last change applied (decimal); absent: never built
//	<prefix>:view:{<shard tag>}:<len(name)>:<name>:rows    hash: entity id → the row's JSON
//	<prefix>:view:{<shard tag>}:<len(name)>:<name>:meta    hash: entity id → its index keys and their positions
//	<prefix>:view:{<shard tag>}:<len(name)>:<name>:q:<query>  sorted set (score 0): the query's index
//	<prefix>:view:{<shard tag>}:<len(name)>:<name>:feed    stream: the rows' changes, by position (see feed.go)
//	<prefix>:view:{<shard tag>}:<len(name)>:<name>:floor   the feed lacks no change after this position
//	<prefix>:view:key                                      the key page tokens and stream cursors are sealed with
//
// An index member is the row's index key (see encode.go), then the
// position at which the entry was made (16 hex digits), the entity id,
// and the id's length (8 hex digits): the key orders the members, the
// rest lets a script find the row and leave out the entries made after a
// page token's snapshot. A query reads every shard's index (one script
// per shard, pipelined) and merges their results.
type redisStore struct {
	client redis.UniversalClient
	keys   keyspace.Space
}

// NewRedisStore returns a Store in client (one Redis or a Redis Cluster)
// under prefix, the service's key prefix.
func NewRedisStore(client redis.UniversalClient, prefix string) Store {
	return &redisStore{client: client, keys: keyspace.Must(prefix)}
}

func (s *redisStore) key(view string, shard int, part string) string {
	return s.keys.Tagged("view", cluster.ShardTag(shard), strconv.Itoa(len(view))+":"+view+":"+part)
}

func (s *redisStore) position(ctx context.Context, view string, shard int) (uint64, bool, error) {
	text, err := s.client.Get(ctx, s.key(view, shard, "pos")).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the position of view %s on shard %d: %w", view, shard, store.Classify(err))
	}
	pos, err := strconv.ParseUint(text, 10, 64)
	return pos, err == nil, err
}

// applyScript: KEYS[1] the shard record, KEYS[2] pos, KEYS[3] rows,
// KEYS[4] meta, KEYS[5] feed, KEYS[6] floor, KEYS[7..] the queries'
// indexes; ARGV[1], ARGV[2] the fence ("" "": none), ARGV[3] mode, ARGV[4]
// to, ARGV[5] the number of queries, ARGV[6] the feed's window, then per
// op: id, since (16 hex), row ("": delete), a key per query. Returns 0
// when fenced, 1 applied, 2 a replay (nothing done).
var applyScript = cluster.FencedScript(`
if ARGV[1] ~= '' and not fence_holds(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
local mode, to = ARGV[3], ARGV[4]
if mode == 'apply' then
	local pos = redis.call('GET', KEYS[2])
	if pos and tonumber(pos) >= tonumber(to) then return 2 end
end
local nq = tonumber(ARGV[5])
local function member(key, since, id)
	return key .. since .. id .. string.format('%08x', #id)
end
local function keyList(ks)
	local t = {}
	for q = 1, nq do
		local k = (ks and ks[q]) or ''
		t[q] = string.format('%08x', #k) .. k
	end
	return table.concat(t)
end
local function record(id, since, row, oldKs, newKs)
	if mode ~= 'apply' then return end
	-- pcall: an entry at or before the feed's last (never expected) is
	-- left out rather than failing the script half way.
	redis.pcall('XADD', KEYS[5], string.format('%d', tonumber(since, 16)) .. '-0',
		'id', id, 'row', row, 'old', keyList(oldKs), 'new', keyList(newKs))
end
local i = 7
while i <= #ARGV do
	local id, since, row = ARGV[i], ARGV[i+1], ARGV[i+2]
	local old = redis.call('HGET', KEYS[4], id)
	local oldKeys, oldSince = {}, {}
	if old then
		local p = 1
		for q = 1, nq do
			local n = tonumber(string.sub(old, p, p+7), 16)
			oldKeys[q] = string.sub(old, p+8, p+7+n)
			oldSince[q] = string.sub(old, p+8+n, p+23+n)
			p = p + 24 + n
		end
	end
	if row == '' then
		if old then
			for q = 1, nq do redis.call('ZREM', KEYS[6+q], member(oldKeys[q], oldSince[q], id)) end
			redis.call('HDEL', KEYS[3], id)
			redis.call('HDEL', KEYS[4], id)
			record(id, since, row, oldKeys, nil)
		end
	else
		local meta, newKeys = {}, {}
		for q = 1, nq do
			local key, s = ARGV[i+2+q], since
			newKeys[q] = key
			if old and oldKeys[q] == key then
				s = oldSince[q]
			else
				if old then redis.call('ZREM', KEYS[6+q], member(oldKeys[q], oldSince[q], id)) end
				redis.call('ZADD', KEYS[6+q], 0, member(key, s, id))
			end
			meta[q] = string.format('%08x', #key) .. key .. s
		end
		redis.call('HSET', KEYS[3], id, row)
		redis.call('HSET', KEYS[4], id, table.concat(meta))
		record(id, since, row, old and oldKeys, newKeys)
	end
	i = i + 3 + nq
end
if mode == 'apply' then
	local cut = tonumber(to) - tonumber(ARGV[6])
	if cut > 0 then
		redis.call('XTRIM', KEYS[5], 'MINID', string.format('%d', cut + 1) .. '-0')
		redis.call('SET', KEYS[6], string.format('%d', cut))
	end
elseif mode == 'built' then
	redis.call('DEL', KEYS[5])
	redis.call('SET', KEYS[6], to)
end
if mode ~= 'build' then redis.call('SET', KEYS[2], to) end
return 1
`)

func (s *redisStore) viewKeys(d *viewDef, shard int) []string {
	keys := []string{cluster.ShardRecordKey(s.keys, shard), s.key(d.gen, shard, "pos"), s.key(d.gen, shard, "rows"), s.key(d.gen, shard, "meta"),
		s.key(d.gen, shard, "feed"), s.key(d.gen, shard, "floor")}
	for _, q := range d.queries {
		keys = append(keys, s.key(d.gen, shard, "q:"+q.name))
	}
	return keys
}

func (s *redisStore) apply(ctx context.Context, f cluster.Fence, d *viewDef, shard int, ops []rowOp, mode applyMode, to uint64) error {
	args := make([]any, 0, 6+len(ops)*(3+len(d.queries)))
	args = f.AppendArgs(args)
	if f.Incarnation == "" {
		args[0], args[1] = "", ""
	}
	args = append(args, string(mode), strconv.FormatUint(to, 10), len(d.queries), feedWindow)
	for _, op := range ops {
		args = append(args, op.id, string(appendUint(nil, op.since)), string(op.row))
		for _, k := range op.keys {
			args = append(args, k)
		}
		for range len(d.queries) - len(op.keys) { // a delete carries no keys
			args = append(args, "")
		}
	}
	n, err := applyScript.Run(ctx, s.client, s.viewKeys(d, shard), args...).Int()
	switch {
	case err != nil:
		return fmt.Errorf("apply changes to view %s on shard %d: %w", d.name, shard, store.Classify(err))
	case n == 0:
		return fmt.Errorf("apply changes to view %s on shard %d (epoch %d): %w", d.name, shard, f.Epoch, entities.ErrFenced)
	}
	return nil
}

func (s *redisStore) ids(ctx context.Context, d *viewDef, shard int) ([]string, error) {
	ids, err := s.client.HKeys(ctx, s.key(d.gen, shard, "rows")).Result()
	if err != nil {
		return nil, fmt.Errorf("list the rows of view %s on shard %d: %w", d.name, shard, store.Classify(err))
	}
	return ids, nil
}

// scanScript: KEYS[1] pos, KEYS[2] rows, KEYS[3] the index; ARGV[1] lo,
// ARGV[2] hi, ARGV[3] "1" to read down, ARGV[4] the most rows, ARGV[5]
// the snapshot position ("": the position now). Returns {snapshot,
// member, row, member, row, ...}.
var scanScript = redis.NewScript(`
local snap = ARGV[5]
if snap == '' then snap = redis.call('GET', KEYS[1]) or '0' end
local sn = tonumber(snap)
local lo, hi, rev, limit = ARGV[1], ARGV[2], ARGV[3] == '1', tonumber(ARGV[4])
local out, got, chunk = {snap}, 0, limit + 16
while true do
	local ms
	if rev then
		ms = redis.call('ZREVRANGEBYLEX', KEYS[3], hi, lo, 'LIMIT', 0, chunk)
	else
		ms = redis.call('ZRANGEBYLEX', KEYS[3], lo, hi, 'LIMIT', 0, chunk)
	end
	for _, m in ipairs(ms) do
		local n = tonumber(string.sub(m, -8), 16)
		local since = tonumber(string.sub(m, -24 - n, -9 - n), 16)
		if since <= sn then
			out[#out + 1] = m
			out[#out + 1] = redis.call('HGET', KEYS[2], string.sub(m, -8 - n, -9))
			got = got + 1
			if got == limit then return out end
		end
	end
	if #ms < chunk then return out end
	if rev then hi = '(' .. ms[#ms] else lo = '(' .. ms[#ms] end
end
`)

func (s *redisStore) scan(ctx context.Context, d *viewDef, qi int, b bounds, shards []int, snapshots []int64) ([]shardRows, error) {
	rev := "0"
	if b.desc {
		rev = "1"
	}
	cmds, err := s.evalEach(ctx, scanScript, len(shards), func(i int) ([]string, []any) {
		snap := ""
		if snapshots[i] >= 0 {
			snap = strconv.FormatInt(snapshots[i], 10)
		}
		keys := []string{s.key(d.gen, shards[i], "pos"), s.key(d.gen, shards[i], "rows"), s.key(d.gen, shards[i], "q:"+d.queries[qi].name)}
		return keys, []any{b.lo, b.hi, rev, b.limit + 1, snap}
	})
	if err != nil {
		return nil, fmt.Errorf("query %s of view %s: %w", d.queries[qi].name, d.name, store.Classify(err))
	}
	out := make([]shardRows, len(shards))
	for i, cmd := range cmds {
		res, _ := cmd.Val().([]any)
		if len(res) == 0 {
			return nil, fmt.Errorf("query %s of view %s: a malformed reply from shard %d", d.queries[qi].name, d.name, shards[i])
		}
		snapText, _ := res[0].(string)
		pos, err := strconv.ParseUint(snapText, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s of view %s: shard %d's position %q: %w", d.queries[qi].name, d.name, shards[i], snapText, err)
		}
		out[i].pos = pos
		for j := 1; j+1 < len(res); j += 2 {
			m, _ := res[j].(string)
			row, _ := res[j+1].(string)
			e, ok := parseMember(m)
			if !ok || row == "" {
				continue // a row removed between the range and its read: not in the script
			}
			e.row = []byte(row)
			out[i].rows = append(out[i].rows, e)
		}
	}
	return out, nil
}

// parseMember splits an index member into its key and id.
func parseMember(m string) (entry, bool) {
	if len(m) < 24 {
		return entry{}, false
	}
	n, err := strconv.ParseUint(m[len(m)-8:], 16, 32)
	if err != nil || int(n)+24 > len(m) {
		return entry{}, false
	}
	rest := m[:len(m)-8]
	id := rest[len(rest)-int(n):]
	key := rest[:len(rest)-int(n)-16]
	return entry{key: key, id: id}, strings.HasSuffix(key, "\x00\x01")
}

// evalEach runs script n times in one pipeline, the i-th with the keys
// and arguments of at(i), loading the script where it is missing.
func (s *redisStore) evalEach(ctx context.Context, script *redis.Script, n int, at func(i int) ([]string, []any)) ([]*redis.Cmd, error) {
	run := func(sha bool) ([]*redis.Cmd, error) {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, n)
		for i := range n {
			keys, args := at(i)
			if sha {
				cmds[i] = script.EvalSha(ctx, pipe, keys, args...)
			} else {
				cmds[i] = script.Eval(ctx, pipe, keys, args...)
			}
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run(true)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = run(false)
	}
	return cmds, err
}
