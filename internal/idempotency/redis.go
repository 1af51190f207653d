package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/store"
)

// RedisStore is an api.IdempotencyStore in Redis: one hash per scope and
// key, <prefix>:idempotency:<len(scope)>:<scope>:<key>, with fields
// state, digest, answer (JSON) and holder, and an expiry (PEXPIRE) that Redis
// enforces. Each operation is one script, so a claim is atomic across the
// service's instances.
type RedisStore struct {
	client redis.UniversalClient
	keys   keyspace.Space
}

var _ api.IdempotencyHolderStore = (*RedisStore)(nil)

// NewRedisStore returns a store over client with keys under prefix (which
// keyspace.CheckPrefix must accept).
func NewRedisStore(client redis.UniversalClient, prefix string) *RedisStore {
	return &RedisStore{client: client, keys: keyspace.Must(prefix)}
}

// key is the hash of scope and key.
func (s *RedisStore) key(scope, key string) string {
	return s.keys.Key("idempotency", fmt.Sprintf("%d:%s:%s", len(scope), scope, key))
}

var (
	// claim: KEYS[1] the hash; ARGV[1] digest, ARGV[2] ttl ms, ARGV[3]
	// holder, ARGV[4] the holder to take a claim of digest from ("" for
	// none). Returns nil when claimed, else {state, digest, answer,
	// holder}.
	claim = redis.NewScript(`
local held = redis.call('HMGET', KEYS[1], 'state', 'digest', 'answer', 'holder')
local free = not held[1] or (held[2] == ARGV[1] and (held[1] == 'unknown' or
	(ARGV[4] ~= '' and held[1] == 'in-flight' and held[4] == ARGV[4])))
if not free then
	return {held[1], held[2], held[3] or '', held[4] or ''}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'in-flight', 'digest', ARGV[1], 'holder', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return false
`)
	// finish: KEYS[1] the hash; ARGV[1] digest, ARGV[2] state, ARGV[3]
	// answer, ARGV[4] ttl ms. Only the claim of digest is replaced.
	finish = redis.NewScript(`
local held = redis.call('HMGET', KEYS[1], 'state', 'digest')
if held[1] ~= 'in-flight' or held[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'answer', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)
	// release: KEYS[1] the hash; ARGV[1] digest.
	release = redis.NewScript(`
local held = redis.call('HMGET', KEYS[1], 'state', 'digest')
if held[1] ~= 'in-flight' or held[2] ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`)
)

// Claim implements api.IdempotencyStore.
func (s *RedisStore) Claim(ctx context.Context, scope, key, digest string, ttl time.Duration) (*api.IdempotencyRecord, error) {
	return s.ClaimAs(ctx, scope, key, digest, "", "", ttl)
}

// ClaimAs implements api.IdempotencyHolderStore.
func (s *RedisStore) ClaimAs(ctx context.Context, scope, key, digest, holder, takeFrom string, ttl time.Duration) (*api.IdempotencyRecord, error) {
	res, err := claim.Run(ctx, s.client, []string{s.key(scope, key)}, digest, ttl.Milliseconds(), holder, takeFrom).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		// A claim whose answer was lost may hold the key: outcome unknown.
		return nil, fmt.Errorf("claim idempotency key: %w", store.ClassifyWriteBy(s.client, err))
	}
	if len(res) != 4 {
		return nil, fmt.Errorf("claim idempotency key: unexpected reply %q", res)
	}
	rec := &api.IdempotencyRecord{State: api.IdempotencyState(res[0]), Digest: res[1], Holder: res[3]}
	if res[2] != "" {
		rec.Answer = new(api.StoredAnswer)
		if err := json.Unmarshal([]byte(res[2]), rec.Answer); err != nil {
			return nil, fmt.Errorf("claim idempotency key: corrupt answer: %w", err)
		}
	}
	return rec, nil
}

// Finish implements api.IdempotencyStore.
func (s *RedisStore) Finish(ctx context.Context, scope, key string, rec api.IdempotencyRecord, ttl time.Duration) error {
	answer := ""
	if rec.Answer != nil {
		b, err := json.Marshal(rec.Answer)
		if err != nil {
			return fmt.Errorf("finish idempotency key: %w", err)
		}
		answer = string(b)
	}
	err := finish.Run(ctx, s.client, []string{s.key(scope, key)}, rec.Digest, string(rec.State), answer, ttl.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("finish idempotency key: %w", store.ClassifyWriteBy(s.client, err))
	}
	return nil
}

// Release implements api.IdempotencyStore.
func (s *RedisStore) Release(ctx context.Context, scope, key, digest string) error {
	if err := release.Run(ctx, s.client, []string{s.key(scope, key)}, digest).Err(); err != nil {
		return fmt.Errorf("release idempotency key: %w", store.ClassifyWriteBy(s.client, err))
	}
	return nil
}
