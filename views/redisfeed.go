package views

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/store"
)

// sealKey is the key kept under <prefix>:view:key: the first instance to
// ask stores a random one (SET NX), every other reads it.
func (s *redisStore) sealKey(ctx context.Context) ([]byte, error) {
	key := s.keys.Key("view", "key")
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh) // never fails (crypto/rand)
	if err := s.client.SetNX(ctx, key, hex.EncodeToString(fresh), 0).Err(); err != nil {
		return nil, fmt.Errorf("store one in Redis: %w", store.Classify(err))
	}
	kept, err := s.client.Get(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("read it from Redis: %w", store.Classify(err))
	}
	return []byte(kept), nil
}

func (s *redisStore) genKey(view string) string {
	return s.keys.Key("view", "gen:"+strconv.Itoa(len(view))+":"+view)
}

func (s *redisStore) generation(ctx context.Context, view string) (generation, error) {
	text, err := s.client.Get(ctx, s.genKey(view)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return generation{}, fmt.Errorf("read the generation of view %s: %w", view, store.Classify(err))
	}
	g, err := decodeGen(text)
	if err != nil {
		return generation{}, fmt.Errorf("read the generation of view %s: %w", view, err)
	}
	return g, nil
}

// casScript: KEYS[1] the generation; ARGV[1] the one expected ("":
// none), ARGV[2] the next. Returns 1 when set.
var casScript = redis.NewScript(`
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`)

func (s *redisStore) setGeneration(ctx context.Context, view string, prev, next generation) (bool, error) {
	expect := ""
	if prev.Gen != "" {
		expect = encodeGen(prev)
	}
	n, err := casScript.Run(ctx, s.client, []string{s.genKey(view)}, expect, encodeGen(next)).Int()
	if err != nil {
		return false, fmt.Errorf("swap in generation %s of view %s: %w", next.Gen, view, store.Classify(err))
	}
	return n == 1, nil
}

// feedScript: KEYS[1] pos, KEYS[2] floor, KEYS[3..] each shard's feed,
// in order; ARGV[1] the most entries a shard, ARGV[2..] the position to
// read each shard after. Returns, per shard, {pos, floor, entries}, all
// read together.
var feedScript = redis.NewScript(`
local out = {}
for i = 3, #KEYS do
	local shard = tostring(i - 3)
	local pos = redis.call('HGET', KEYS[1], shard) or '0'
	local floor = redis.call('HGET', KEYS[2], shard) or '0'
	out[#out + 1] = {pos, floor, redis.call('XRANGE', KEYS[i], '(' .. ARGV[i - 1] .. '-0', '+', 'COUNT', ARGV[1])}
end
return out
`)

func (s *redisStore) feed(ctx context.Context, d *viewDef, after []uint64, limit int) ([]shardFeed, error) {
	keys := make([]string, 0, 2+len(after))
	keys = append(keys, s.key(d.gen, "pos"), s.key(d.gen, "floor"))
	args := make([]any, 0, 1+len(after))
	args = append(args, limit)
	for shard, pos := range after {
		keys = append(keys, s.shardKey(d.gen, "feed", shard))
		args = append(args, strconv.FormatUint(pos, 10))
	}
	res, err := feedScript.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("read the changes of view %s: %w", d.name, store.Classify(err))
	}
	if len(res) != len(after) {
		return nil, fmt.Errorf("read the changes of view %s: a malformed reply of %d shards", d.name, len(res))
	}
	out := make([]shardFeed, len(after))
	for i, raw := range res {
		one, _ := raw.([]any)
		if len(one) != 3 {
			return nil, fmt.Errorf("read the changes of view %s: a malformed reply for shard %d", d.name, i)
		}
		if out[i], err = parseFeed(one, len(d.queries)); err != nil {
			return nil, fmt.Errorf("read the changes of view %s on shard %d: %w", d.name, i, err)
		}
	}
	return out, nil
}

// parseFeed reads feedScript's reply.
func parseFeed(res []any, nq int) (shardFeed, error) {
	var f shardFeed
	var err error
	posText, _ := res[0].(string)
	floorText, _ := res[1].(string)
	if f.pos, err = strconv.ParseUint(posText, 10, 64); err != nil {
		return f, fmt.Errorf("position %q: %w", posText, err)
	}
	if f.floor, err = strconv.ParseUint(floorText, 10, 64); err != nil {
		return f, fmt.Errorf("floor %q: %w", floorText, err)
	}
	entries, _ := res[2].([]any)
	for _, raw := range entries {
		e, _ := raw.([]any)
		if len(e) != 2 {
			return f, fmt.Errorf("a malformed entry %v", raw)
		}
		idText, _ := e[0].(string)
		seqText, _, _ := strings.Cut(idText, "-")
		var c rowChange
		if c.seq, err = strconv.ParseUint(seqText, 10, 64); err != nil {
			return f, fmt.Errorf("entry id %q: %w", idText, err)
		}
		fields, _ := e[1].([]any)
		for j := 0; j+1 < len(fields); j += 2 {
			name, _ := fields[j].(string)
			value, _ := fields[j+1].(string)
			switch name {
			case "id":
				c.id = value
			case "row":
				if value != "" {
					c.row = []byte(value)
				}
			case "old":
				c.old, err = splitKeys(value, nq)
			case "new":
				c.new, err = splitKeys(value, nq)
			}
			if err != nil {
				return f, fmt.Errorf("entry %s: %w", idText, err)
			}
		}
		f.changes = append(f.changes, c)
	}
	return f, nil
}

// splitKeys reads nq keys, each after its length in 8 hex digits.
func splitKeys(text string, nq int) ([]string, error) {
	keys := make([]string, nq)
	for q := range nq {
		if len(text) < 8 {
			return nil, fmt.Errorf("keys %q: too short", text)
		}
		n, err := strconv.ParseUint(text[:8], 16, 32)
		if err != nil || int(n) > len(text)-8 {
			return nil, fmt.Errorf("keys %q: a bad length", text)
		}
		keys[q], text = text[8:8+n], text[8+n:]
	}
	return keys, nil
}
