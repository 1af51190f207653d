package views

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/store"
)

// redisStore keeps views in Redis or a Redis Cluster. Every key of one
// generation of a view carries the same hash tag (viewTag: a hash of the
// generation), so they live in one slot: one script writes a batch's rows,
// their index entries and the shard's position, and one script reads a
// page from the view's one index per query.
//
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:pos       hash: shard → the last change applied (decimal); absent: never built
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:fence     hash: shard → the highest owner epoch that wrote it
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:seq       the view's write counter: one more per batch applied
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:rows      hash: entity id → the row's JSON
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:meta      hash: entity id → its index keys and their counters
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:ids:<N>   set: the ids of shard N's rows
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:q:<query> sorted set (score 0): the query's index
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:feed:<N>  stream: shard N's row changes, by position (see feed.go)
//	<prefix>:view:{<tag>}:<len(gen)>:<gen>:floor     hash: shard → the feed lacks no change after it
//	<prefix>:view:key                                the key page tokens and stream cursors are sealed with
//
// An index member is the row's index key (see encode.go), then the view's
// counter when the entry was made (16 hex digits), the entity id, and the
// id's length (8 hex digits): the key orders the members, the rest lets a
// script find the row and leave out the entries made after a page token's
// snapshot of the counter.
//
// The shard's fence lives in the shard's slot, which a script of the
// view's slot cannot read. The view keeps its own: the highest epoch of
// an owner that wrote each shard. A projector claims its epoch as it
// opens the shard (before it reads the position), and a batch of a lower
// epoch is refused from then on, so a deposed owner's late batch never
// lands after its successor began. Epochs only grow (every change of
// owner adds one), so the claim needs no compare with the shard record.
type redisStore struct {
	client redis.UniversalClient
	keys   keyspace.Space
	// group sends the batches the projectors apply at the same time in
	// one pipeline: while one is under way, the batches that come wait
	// and go together in the next (each still its own script, atomic on
	// its own). A projector per view and shard applies its shard's
	// changes as they come; without it, each of hundreds of them would
	// take a round trip, and a connection, of its own.
	group *store.Batcher
}

// maxGroup is the most batches one pipeline sends: the scripts of a
// pipeline run one after the other, and a few hundred builds' batches of
// 100 rows would hold Redis for long.
const maxGroup = 64

// NewRedisStore returns a Store in client (one Redis or a Redis Cluster)
// under prefix, the service's key prefix.
func NewRedisStore(client redis.UniversalClient, prefix string) Store {
	return &redisStore{client: client, keys: keyspace.Must(prefix), group: store.NewBatcher(client, 1, maxGroup)}
}

// viewTag is the hash tag of generation gen's keys: a hash, since a
// view's name may hold braces.
func viewTag(gen string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(gen))
	return "v." + strconv.FormatUint(h.Sum64(), 16)
}

func (s *redisStore) key(gen, part string) string {
	return s.keys.Tagged("view", viewTag(gen), strconv.Itoa(len(gen))+":"+gen+":"+part)
}

func (s *redisStore) shardKey(gen, part string, shard int) string {
	return s.key(gen, part+":"+strconv.Itoa(shard))
}

func (s *redisStore) position(ctx context.Context, view string, shard int) (uint64, bool, error) {
	text, err := s.client.HGet(ctx, s.key(view, "pos"), strconv.Itoa(shard)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the position of view %s on shard %d: %w", view, shard, store.Classify(err))
	}
	pos, err := strconv.ParseUint(text, 10, 64)
	return pos, err == nil, err
}

func (s *redisStore) builtShards(ctx context.Context, view string) (int, error) {
	n, err := s.client.HLen(ctx, s.key(view, "pos")).Result()
	if err != nil {
		return 0, fmt.Errorf("read how many shards of view %s are built: %w", view, store.Classify(err))
	}
	return int(n), nil
}

func (s *redisStore) positions(ctx context.Context, view string) ([]uint64, error) {
	all, err := s.client.HGetAll(ctx, s.key(view, "pos")).Result()
	if err != nil {
		return nil, fmt.Errorf("read the positions of view %s: %w", view, store.Classify(err))
	}
	out := make([]uint64, numShards)
	for shardText, posText := range all {
		shard, err1 := strconv.Atoi(shardText)
		pos, err2 := strconv.ParseUint(posText, 10, 64)
		if err1 != nil || err2 != nil || shard < 0 || shard >= numShards {
			return nil, fmt.Errorf("read the positions of view %s: a malformed position %q of shard %q", view, posText, shardText)
		}
		out[shard] = pos
	}
	return out, nil
}

// fenceLua defines fenced(fences, shard, epoch): false when a higher
// epoch than epoch ("": not checked) wrote the shard; else it records
// epoch as the shard's.
const fenceLua = `
local function fenced(fences, shard, epoch)
	if epoch == '' then return false end
	local e = redis.call('HGET', fences, shard)
	if e and tonumber(e) > tonumber(epoch) then return true end
	if not e or tonumber(e) < tonumber(epoch) then redis.call('HSET', fences, shard, epoch) end
	return false
end
`

// openScript: KEYS[1] fence, KEYS[2] pos; ARGV[1] the shard, ARGV[2] the
// epoch. Returns {0} when fenced, else {1, pos or false}.
var openScript = redis.NewScript(fenceLua + `
if fenced(KEYS[1], ARGV[1], ARGV[2]) then return {0} end
return {1, redis.call('HGET', KEYS[2], ARGV[1])}
`)

func (s *redisStore) open(ctx context.Context, f cluster.Fence, d *viewDef, shard int) (uint64, bool, error) {
	res, err := openScript.Run(ctx, s.client, []string{s.key(d.gen, "fence"), s.key(d.gen, "pos")},
		strconv.Itoa(shard), epochArg(f)).Slice()
	if err != nil {
		return 0, false, fmt.Errorf("open view %s on shard %d: %w", d.name, shard, store.Classify(err))
	}
	if n, _ := res[0].(int64); n == 0 {
		return 0, false, fmt.Errorf("open view %s on shard %d (epoch %d): %w", d.name, shard, f.Epoch, entities.ErrFenced)
	}
	text, _ := res[1].(string)
	if text == "" {
		return 0, false, nil
	}
	pos, err := strconv.ParseUint(text, 10, 64)
	return pos, err == nil, err
}

// epochArg is f's epoch as the scripts take it: "" when f is empty (not
// checked).
func epochArg(f cluster.Fence) string {
	if f.Incarnation == "" {
		return ""
	}
	return strconv.FormatUint(f.Epoch, 10)
}

// applyScript: KEYS[1] fence, KEYS[2] pos, KEYS[3] rows, KEYS[4] meta,
// KEYS[5] the shard's feed, KEYS[6] floor, KEYS[7] seq, KEYS[8] the
// shard's ids, KEYS[9..] the queries' indexes; ARGV[1] the shard, ARGV[2]
// the epoch ("": none), ARGV[3] mode, ARGV[4] to, ARGV[5] the number of
// queries, ARGV[6] the feed's window, then per op: id, its change's
// position (decimal), row ("": delete), a key per query. Returns 0 when
// fenced, 1 applied, 2 a replay (nothing done).
var applyScript = redis.NewScript(fenceLua + `
local shard, mode, to = ARGV[1], ARGV[3], ARGV[4]
if fenced(KEYS[1], shard, ARGV[2]) then return 0 end
if mode == 'apply' then
	local pos = redis.call('HGET', KEYS[2], shard)
	if pos and tonumber(pos) >= tonumber(to) then return 2 end
end
local nq = tonumber(ARGV[5])
local seq = string.format('%016x', redis.call('INCR', KEYS[7]))
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
local function record(id, at, row, oldKs, newKs)
	if mode ~= 'apply' then return end
	-- pcall: an entry at or before the feed's last (never expected) is
	-- left out rather than failing the script half way.
	redis.pcall('XADD', KEYS[5], at .. '-0', 'id', id, 'row', row, 'old', keyList(oldKs), 'new', keyList(newKs))
end
local i = 7
while i <= #ARGV do
	local id, at, row = ARGV[i], ARGV[i+1], ARGV[i+2]
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
			for q = 1, nq do redis.call('ZREM', KEYS[8+q], member(oldKeys[q], oldSince[q], id)) end
			redis.call('HDEL', KEYS[3], id)
			redis.call('HDEL', KEYS[4], id)
			redis.call('SREM', KEYS[8], id)
			record(id, at, row, oldKeys, nil)
		end
	else
		local meta, newKeys = {}, {}
		for q = 1, nq do
			local key, s = ARGV[i+2+q], seq
			newKeys[q] = key
			if old and oldKeys[q] == key then
				s = oldSince[q]
			else
				if old then redis.call('ZREM', KEYS[8+q], member(oldKeys[q], oldSince[q], id)) end
				redis.call('ZADD', KEYS[8+q], 0, member(key, s, id))
			end
			meta[q] = string.format('%08x', #key) .. key .. s
		end
		redis.call('HSET', KEYS[3], id, row)
		redis.call('HSET', KEYS[4], id, table.concat(meta))
		if not old then redis.call('SADD', KEYS[8], id) end
		record(id, at, row, old and oldKeys, newKeys)
	end
	i = i + 3 + nq
end
if mode == 'apply' then
	local cut = tonumber(to) - tonumber(ARGV[6])
	if cut > 0 then
		redis.call('XTRIM', KEYS[5], 'MINID', string.format('%d', cut + 1) .. '-0')
		redis.call('HSET', KEYS[6], shard, string.format('%d', cut))
	end
elseif mode == 'built' then
	redis.call('DEL', KEYS[5])
	redis.call('HSET', KEYS[6], shard, to)
end
if mode ~= 'build' then redis.call('HSET', KEYS[2], shard, to) end
return 1
`)

func (s *redisStore) apply(ctx context.Context, f cluster.Fence, d *viewDef, shard int, ops []rowOp, mode applyMode, to uint64) error {
	keys := []string{s.key(d.gen, "fence"), s.key(d.gen, "pos"), s.key(d.gen, "rows"), s.key(d.gen, "meta"),
		s.shardKey(d.gen, "feed", shard), s.key(d.gen, "floor"), s.key(d.gen, "seq"), s.shardKey(d.gen, "ids", shard)}
	for _, q := range d.queries {
		keys = append(keys, s.key(d.gen, "q:"+q.name))
	}
	args := make([]any, 0, 6+len(ops)*(3+len(d.queries)))
	args = append(args, strconv.Itoa(shard), epochArg(f), string(mode), strconv.FormatUint(to, 10), len(d.queries), feedWindow)
	for _, op := range ops {
		args = append(args, op.id, strconv.FormatUint(op.since, 10), string(op.row))
		for _, k := range op.keys {
			args = append(args, k)
		}
		for range len(d.queries) - len(op.keys) { // a delete carries no keys
			args = append(args, "")
		}
	}
	// A batch whose answer is lost may be applied still: applied again,
	// it is a no-op.
	n, err := s.group.Run(ctx, applyScript, keys, args...).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("apply changes to view %s on shard %d: %w", d.name, shard, store.Classify(err))
	case n == 0:
		return fmt.Errorf("apply changes to view %s on shard %d (epoch %d): %w", d.name, shard, f.Epoch, entities.ErrFenced)
	}
	return nil
}

func (s *redisStore) rows(ctx context.Context, d *viewDef, ids []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	vals, err := s.client.HMGet(ctx, s.key(d.gen, "rows"), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("read rows of view %s: %w", d.name, store.Classify(err))
	}
	for i, v := range vals {
		if text, ok := v.(string); ok {
			out[ids[i]] = []byte(text)
		}
	}
	return out, nil
}

func (s *redisStore) ids(ctx context.Context, d *viewDef, shard int) ([]string, error) {
	ids, err := s.client.SMembers(ctx, s.shardKey(d.gen, "ids", shard)).Result()
	if err != nil {
		return nil, fmt.Errorf("list the rows of view %s on shard %d: %w", d.name, shard, store.Classify(err))
	}
	return ids, nil
}

// scanScript: KEYS[1] seq, KEYS[2] rows, KEYS[3] the index, KEYS[4] pos;
// ARGV[1] lo, ARGV[2] hi, ARGV[3] "1" to read down, ARGV[4] the most
// rows, ARGV[5] the snapshot ("": the counter now), ARGV[6] "1" for the
// shards' positions. Returns {snapshot, positions (HGETALL's, or empty),
// member, row, member, row, ...}.
var scanScript = redis.NewScript(`
local snap = ARGV[5]
if snap == '' then snap = redis.call('GET', KEYS[1]) or '0' end
local sn = tonumber(snap)
local lo, hi, rev, limit = ARGV[1], ARGV[2], ARGV[3] == '1', tonumber(ARGV[4])
local pos = {}
if ARGV[6] == '1' then pos = redis.call('HGETALL', KEYS[4]) end
local out, got, chunk = {snap, pos}, 0, limit + 16
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

func (s *redisStore) scan(ctx context.Context, d *viewDef, qi int, b bounds, snapshot int64, positions bool) (scanned, error) {
	rev, snap, withPos := "0", "", "0"
	if b.desc {
		rev = "1"
	}
	if snapshot >= 0 {
		snap = strconv.FormatInt(snapshot, 10)
	}
	if positions {
		withPos = "1"
	}
	name := d.queries[qi].name
	keys := []string{s.key(d.gen, "seq"), s.key(d.gen, "rows"), s.key(d.gen, "q:"+name), s.key(d.gen, "pos")}
	res, err := scanScript.Run(ctx, s.client, keys, b.lo, b.hi, rev, b.limit+1, snap, withPos).Slice()
	if err != nil {
		return scanned{}, fmt.Errorf("query %s of view %s: %w", name, d.name, store.Classify(err))
	}
	var out scanned
	snapText, _ := res[0].(string)
	if out.seq, err = strconv.ParseUint(snapText, 10, 64); err != nil {
		return scanned{}, fmt.Errorf("query %s of view %s: the snapshot %q: %w", name, d.name, snapText, err)
	}
	if positions {
		out.pos = make([]uint64, numShards)
		flat, _ := res[1].([]any)
		for j := 0; j+1 < len(flat); j += 2 {
			shardText, _ := flat[j].(string)
			posText, _ := flat[j+1].(string)
			shard, err1 := strconv.Atoi(shardText)
			pos, err2 := strconv.ParseUint(posText, 10, 64)
			if err1 != nil || err2 != nil || shard < 0 || shard >= numShards {
				return scanned{}, fmt.Errorf("query %s of view %s: a malformed position %q of shard %q", name, d.name, posText, shardText)
			}
			out.pos[shard] = pos
		}
	}
	for j := 2; j+1 < len(res); j += 2 {
		m, _ := res[j].(string)
		row, _ := res[j+1].(string)
		e, ok := parseMember(m)
		if !ok || row == "" {
			continue // a member the script did not make, or a row it could not read
		}
		e.row = []byte(row)
		out.rows = append(out.rows, e)
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
