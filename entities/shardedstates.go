package entities

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/store"
)

var _ StateLister = (*ShardedRedisStore)(nil)

// statesBatch is how many states [ShardedRedisStore.States] reads a round
// trip.
const statesBatch = 100

// StateIDs implements [StateLister]: one SCAN of the keys of entityType's
// states in any shard (<prefix>:entity:{*}:<len(type)>:<type>:*), over
// each master on Redis Cluster. A key the pattern matches is taken only
// if it is the state key of its id's shard.
func (s *ShardedRedisStore) StateIDs(ctx context.Context, entityType string) ([]string, error) {
	fail := func(err error) error {
		return fmt.Errorf("list the states of %q: %w", entityType, store.Classify(err))
	}
	tag := "{" + cluster.ShardTag(0) + "}"
	before, after, _ := strings.Cut(s.shards[0].entity, tag)
	typed := after + strconv.Itoa(len(entityType)) + ":" + entityType + ":"
	pattern := globEscape(before) + "{*}" + globEscape(typed) + "*"
	var mu sync.Mutex
	var ids []string
	scan := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, pattern, 500).Iterator()
		var found []string
		for iter.Next(ctx) {
			if id, ok := s.stateID(entityType, before, typed, iter.Val()); ok {
				found = append(found, id)
			}
		}
		mu.Lock()
		ids = append(ids, found...)
		mu.Unlock()
		return iter.Err()
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, s.client)
	}
	if err != nil {
		return nil, fail(err)
	}
	// A key moving between masters during the scan may be seen on both.
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// stateID returns the id of the state key key (before{tag}typed<id>), if
// it is the key of that id's shard.
func (s *ShardedRedisStore) stateID(entityType, before, typed, key string) (string, bool) {
	rest := strings.TrimPrefix(key, before)
	_, tail, ok := strings.Cut(rest, "}") // a tag holds no brace
	if !ok || !strings.HasPrefix(tail, typed) {
		return "", false
	}
	id := tail[len(typed):]
	return id, key == s.stateKeyIn(cluster.ShardOf(entityType, id), entityType, id)
}

// States implements [StateLister]: one pipeline of HMGETs per statesBatch
// ids.
func (s *ShardedRedisStore) States(ctx context.Context, entityType string, ids []string, fn func(Change) error) error {
	fail := func(err error) error {
		return fmt.Errorf("read the states of %q: %w", entityType, err)
	}
	for batch := range slices.Chunk(ids, statesBatch) {
		pipe := s.client.Pipeline()
		keys := make([]string, len(batch))
		cmds := make([]*redis.SliceCmd, len(batch))
		for i, id := range batch {
			keys[i] = s.stateKeyIn(cluster.ShardOf(entityType, id), entityType, id)
			cmds[i] = pipe.HMGet(ctx, keys[i], "data", "rev")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fail(store.Classify(err))
		}
		for i, id := range batch {
			rec, err := parseHash(keys[i], cmds[i].Val())
			if err != nil {
				return fail(err)
			}
			if rec.Revision == 0 {
				continue // deleted since it was listed
			}
			if err := fn(Change{EntityType: entityType, EntityID: id, Revision: rec.Revision, Data: rec.Data}); err != nil {
				return err
			}
		}
	}
	return nil
}
