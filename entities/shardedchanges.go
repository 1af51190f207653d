package entities

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/store"
)

var _ ChangeLog = (*ShardedRedisStore)(nil)

// SetChangeLogLimit sets about how many changes each shard's log keeps at
// most (DefaultChangeLogLimit until then; MAXLEN ~ may keep a little
// more). Call it before the store is used; every instance of a cluster
// should use the same.
func (s *ShardedRedisStore) SetChangeLogLimit(n int) { s.limit = max(n, 1) }

// changeKeys are shard's checkpoints hash, change counter and change log,
// in the shard's slot.
func (s *ShardedRedisStore) changeKeys(shard int) []string {
	k := &s.shards[shard]
	return []string{k.checkpoints, k.changeSeq, k.changes}
}

var (
	// registerScript: KEYS[1] checkpoints, KEYS[2] change counter;
	// ARGV[1] consumer. Returns the consumer's checkpoint, set to the
	// counter if it had none.
	registerScript = redis.NewScript(`
local cp = redis.call('HGET', KEYS[1], ARGV[1])
if cp then return cp end
local head = redis.call('GET', KEYS[2]) or '0'
redis.call('HSET', KEYS[1], ARGV[1], head)
return head
`)

	// checkpointScript: KEYS[1] shard record, KEYS[2] checkpoints, KEYS[3]
	// log; ARGV[1], ARGV[2] the fence, ARGV[3] consumer, ARGV[4] its
	// checkpoint. Returns 0 when fenced; else sets it, trims the log up to
	// the lowest checkpoint (compared as decimal strings) and returns 1.
	checkpointScript = cluster.FencedScript(`
if not fence_holds(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
local lowest = ARGV[4]
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
	if #v < #lowest or (#v == #lowest and v < lowest) then lowest = v end
end
redis.call('XTRIM', KEYS[3], 'MINID', lowest .. '-1')
return 1
`)

	// changesScript: KEYS[1] change counter, KEYS[2] log; ARGV[1] after,
	// ARGV[2] count. Returns {head, entries after ARGV[1]}.
	changesScript = redis.NewScript(`
local head = redis.call('GET', KEYS[1]) or '0'
return {head, redis.call('XRANGE', KEYS[2], '(' .. ARGV[1] .. '-0', '+', 'COUNT', ARGV[2])}
`)
)

// Register implements [ChangeLog].
func (s *ShardedRedisStore) Register(ctx context.Context, consumer string, shard int) (uint64, error) {
	k := s.changeKeys(shard)
	text, err := registerScript.Run(ctx, s.client, k[:2], consumer).Text()
	if err != nil {
		return 0, fmt.Errorf("register consumer %q on shard %d: %w", consumer, shard, store.Classify(err))
	}
	return parseRevision(text)
}

// Checkpoint implements [ChangeLog].
func (s *ShardedRedisStore) Checkpoint(ctx context.Context, consumer string, shard int) (uint64, bool, error) {
	text, err := s.client.HGet(ctx, s.changeKeys(shard)[0], consumer).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("checkpoint of consumer %q on shard %d: %w", consumer, shard, store.Classify(err))
	}
	seq, err := parseRevision(text)
	return seq, err == nil, err
}

// SaveCheckpoint implements [ChangeLog]: refused with ErrFenced when f is
// no longer shard's fence.
func (s *ShardedRedisStore) SaveCheckpoint(ctx context.Context, f Fence, consumer string, shard int, seq uint64) error {
	k := s.changeKeys(shard)
	args := append(f.Args(), consumer, strconv.FormatUint(seq, 10))
	n, err := checkpointScript.Run(ctx, s.client, []string{s.shards[shard].record, k[0], k[2]}, args...).Int()
	switch {
	case err != nil:
		return fmt.Errorf("save the checkpoint of consumer %q on shard %d: %w", consumer, shard, store.Classify(err))
	case n == 0:
		return fmt.Errorf("save the checkpoint of consumer %q on shard %d (epoch %d): %w", consumer, shard, f.Epoch, ErrFenced)
	}
	return nil
}

// Changes implements [ChangeLog] with one script: the counter and XRANGE.
func (s *ShardedRedisStore) Changes(ctx context.Context, shard int, after uint64, limit int) ([]Change, uint64, bool, error) {
	fail := func(err error) ([]Change, uint64, bool, error) {
		return nil, 0, false, fmt.Errorf("read the changes of shard %d: %w", shard, err)
	}
	k := s.changeKeys(shard)
	res, err := changesScript.Run(ctx, s.client, k[1:], strconv.FormatUint(after, 10), limit).Slice()
	if err != nil {
		return fail(store.Classify(err))
	}
	headText, _ := res[0].(string)
	head, err := parseRevision(headText)
	if err != nil {
		return fail(err)
	}
	entries, _ := res[1].([]any)
	changes := make([]Change, 0, len(entries))
	for _, e := range entries {
		c, err := parseEntry(e)
		if err != nil {
			return fail(err)
		}
		changes = append(changes, c)
	}
	missed := head > after && (len(changes) == 0 || changes[0].Seq > after+1)
	return changes, head, missed, nil
}

// parseEntry decodes one XRANGE entry of a change log from a script's
// reply: [id, [field, value, ...]].
func parseEntry(e any) (Change, error) {
	pair, _ := e.([]any)
	if len(pair) != 2 {
		return Change{}, fmt.Errorf("corrupt log entry %v", e)
	}
	id, _ := pair[0].(string)
	seqText, _, _ := strings.Cut(id, "-")
	seq, err := parseRevision(seqText)
	if err != nil {
		return Change{}, fmt.Errorf("log entry %q: %w", id, err)
	}
	c := Change{Seq: seq, Deleted: true}
	fields, _ := pair[1].([]any)
	for i := 0; i+1 < len(fields); i += 2 {
		name, _ := fields[i].(string)
		value, _ := fields[i+1].(string)
		switch name {
		case "t":
			c.EntityType = value
		case "i":
			c.EntityID = value
		case "r":
			if c.Revision, err = parseRevision(value); err != nil {
				return Change{}, fmt.Errorf("log entry %q: %w", id, err)
			}
		case "a":
			us, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return Change{}, fmt.Errorf("log entry %q: time %q: %w", id, value, err)
			}
			c.At = time.UnixMicro(us)
		case "d":
			c.Data, c.Deleted = []byte(value), false
		case "c":
			c.TraceContext = value
		}
	}
	return c, nil
}

// Current implements [ChangeLog]: it scans the shard's keys of entityType
// on the master that holds the shard's slot, and reads each state.
func (s *ShardedRedisStore) Current(ctx context.Context, shard int, entityType string, fn func(Change) error) error {
	fail := func(err error) error {
		return fmt.Errorf("read the states of %q in shard %d: %w", entityType, shard, err)
	}
	prefix := s.stateKeyIn(shard, entityType, "")
	var node redis.Cmdable = s.client
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, prefix)
		if err != nil {
			return fail(store.Classify(err))
		}
		node = master
	}
	iter := node.Scan(ctx, 0, globEscape(prefix)+"*", 500).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		rec, err := loadHash(ctx, s.client, key)
		if err != nil {
			return fail(store.Classify(err))
		}
		if rec.Revision == 0 {
			continue // deleted since the scan saw it
		}
		c := Change{EntityType: entityType, EntityID: strings.TrimPrefix(key, prefix), Revision: rec.Revision, Data: rec.Data}
		if err := fn(c); err != nil {
			return err
		}
	}
	if err := iter.Err(); err != nil {
		return fail(store.Classify(err))
	}
	return nil
}

// globEscape escapes the characters SCAN's MATCH gives a meaning to.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Watch implements [ChangeLog]: fn hears of this value's own writes,
// from the write script's reply (no read of the log).
func (s *ShardedRedisStore) Watch(fn func(shard int, c Change)) (stop func()) {
	return s.watches.add(fn)
}
