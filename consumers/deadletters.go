package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/store"
)

// DeadLetter is a change that ran out of retries: kept, with its last
// error, until an operator retries it (the handler runs once more) or
// drops it. A consumer keeps at most one per entity: the latest.
type DeadLetter struct {
	Consumer string `json:"consumer"`
	Shard    int    `json:"shard"`
	EntityID string `json:"entityId"`
	Revision uint64 `json:"revision"`
	Deleted  bool   `json:"deleted"`
	// State is the entity's state as recorded (absent for a deletion).
	State    json.RawMessage `json:"state,omitempty"`
	Error    string          `json:"error"`
	Attempts int             `json:"attempts"`
	// At is when the change was given up.
	At time.Time `json:"at"`
	// EntityType is the consumer's entity type.
	EntityType string `json:"entityType"`
}

// deadLetterOf is p given up at now.
func deadLetterOf(consumer string, shard int, p *pending, now time.Time) DeadLetter {
	c := p.change
	d := DeadLetter{Consumer: consumer, Shard: shard, EntityID: c.EntityID, EntityType: c.EntityType,
		Revision: c.Revision, Deleted: c.Deleted, Error: p.err.Error(), Attempts: p.attempts, At: now.UTC()}
	if !c.Deleted && json.Valid(c.Data) {
		d.State = json.RawMessage(c.Data)
	}
	return d
}

// change is the dead letter as a change to handle again.
func (d DeadLetter) change() change {
	c := change{EntityType: d.EntityType, EntityID: d.EntityID, Revision: d.Revision, Deleted: d.Deleted}
	if !d.Deleted {
		c.Data = d.State
	}
	return c
}

// ErrNoDeadLetter is wrapped when a consumer holds no dead letter for an
// entity (components.ErrNotFound-like: the admin API answers 404).
var ErrNoDeadLetter = errors.New("no such dead letter")

// ErrHandlerFailed is wrapped by RetryDeadLetter when the handler failed
// again (the dead letter stays).
var ErrHandlerFailed = errors.New("the handler failed")

// DeadLetters keeps dead letters: one per consumer and entity.
type DeadLetters interface {
	// Put keeps d, replacing the consumer's dead letter of its entity.
	Put(ctx context.Context, d DeadLetter) error
	// List is consumer's dead letters, by entity id.
	List(ctx context.Context, consumer string) ([]DeadLetter, error)
	// Get is consumer's dead letter of entity id (wrapping
	// ErrNoDeadLetter when there is none).
	Get(ctx context.Context, consumer, entityID string) (DeadLetter, error)
	// Delete removes it (wrapping ErrNoDeadLetter when there is none).
	Delete(ctx context.Context, consumer, entityID string) error
}

// MemoryDeadLetters keeps dead letters in memory: the embedded store's.
type MemoryDeadLetters struct {
	mu    sync.Mutex
	byKey map[string]map[string]DeadLetter
}

// NewMemoryDeadLetters returns an empty MemoryDeadLetters.
func NewMemoryDeadLetters() *MemoryDeadLetters {
	return &MemoryDeadLetters{byKey: make(map[string]map[string]DeadLetter)}
}

// Put implements DeadLetters.
func (m *MemoryDeadLetters) Put(_ context.Context, d DeadLetter) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byKey[d.Consumer] == nil {
		m.byKey[d.Consumer] = make(map[string]DeadLetter)
	}
	m.byKey[d.Consumer][d.EntityID] = d
	return nil
}

// List implements DeadLetters.
func (m *MemoryDeadLetters) List(_ context.Context, consumer string) ([]DeadLetter, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byID := m.byKey[consumer]
	out := make([]DeadLetter, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		out = append(out, byID[id])
	}
	return out, nil
}

// Get implements DeadLetters.
func (m *MemoryDeadLetters) Get(_ context.Context, consumer, entityID string) (DeadLetter, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.byKey[consumer][entityID]
	if !ok {
		return DeadLetter{}, noDeadLetter(consumer, entityID)
	}
	return d, nil
}

// Delete implements DeadLetters.
func (m *MemoryDeadLetters) Delete(_ context.Context, consumer, entityID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byKey[consumer][entityID]; !ok {
		return noDeadLetter(consumer, entityID)
	}
	delete(m.byKey[consumer], entityID)
	return nil
}

func noDeadLetter(consumer, entityID string) error {
	return fmt.Errorf("consumer %q, entity %q: %w", consumer, entityID, ErrNoDeadLetter)
}

// RedisDeadLetters keeps dead letters in Redis: one hash per consumer,
//
//	<prefix>:consumers:dead:<consumer>   hash: entity id → the dead letter (JSON)
type RedisDeadLetters struct {
	client redis.UniversalClient
	keys   keyspace.Space
}

// NewRedisDeadLetters returns the dead letters of the service whose keys
// start with prefix. It panics on a bad prefix, as entities.NewRedisStore
// does.
func NewRedisDeadLetters(client redis.UniversalClient, prefix string) *RedisDeadLetters {
	return &RedisDeadLetters{client: client, keys: keyspace.Must(prefix)}
}

func (s *RedisDeadLetters) key(consumer string) string {
	return s.keys.Key("consumers", "dead:"+consumer)
}

// Put implements DeadLetters.
func (s *RedisDeadLetters) Put(ctx context.Context, d DeadLetter) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("keep a dead letter of %q: %w", d.Consumer, err)
	}
	if err := s.client.HSet(ctx, s.key(d.Consumer), d.EntityID, b).Err(); err != nil {
		return fmt.Errorf("keep a dead letter of %q: %w", d.Consumer, store.Classify(err))
	}
	return nil
}

// List implements DeadLetters.
func (s *RedisDeadLetters) List(ctx context.Context, consumer string) ([]DeadLetter, error) {
	all, err := s.client.HGetAll(ctx, s.key(consumer)).Result()
	if err != nil {
		return nil, fmt.Errorf("list the dead letters of %q: %w", consumer, store.Classify(err))
	}
	out := make([]DeadLetter, 0, len(all))
	for _, id := range slices.Sorted(maps.Keys(all)) {
		var d DeadLetter
		if err := json.NewDecoder(strings.NewReader(all[id])).Decode(&d); err != nil {
			return nil, fmt.Errorf("list the dead letters of %q: entity %q: %w", consumer, id, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Get implements DeadLetters.
func (s *RedisDeadLetters) Get(ctx context.Context, consumer, entityID string) (DeadLetter, error) {
	b, err := s.client.HGet(ctx, s.key(consumer), entityID).Bytes()
	if errors.Is(err, redis.Nil) {
		return DeadLetter{}, noDeadLetter(consumer, entityID)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("read a dead letter of %q: %w", consumer, store.Classify(err))
	}
	var d DeadLetter
	if err := json.Unmarshal(b, &d); err != nil {
		return DeadLetter{}, fmt.Errorf("read a dead letter of %q: entity %q: %w", consumer, entityID, err)
	}
	return d, nil
}

// Delete implements DeadLetters.
func (s *RedisDeadLetters) Delete(ctx context.Context, consumer, entityID string) error {
	n, err := s.client.HDel(ctx, s.key(consumer), entityID).Result()
	if err != nil {
		return fmt.Errorf("drop a dead letter of %q: %w", consumer, store.Classify(err))
	}
	if n == 0 {
		return noDeadLetter(consumer, entityID)
	}
	return nil
}

// RetryDeadLetter runs consumer's handler once more, here and now, on its
// dead letter of entity entityID, and drops the dead letter when it
// succeeds. The change is handled as it was recorded: if the entity
// changed since, its later changes were handled already (at least once
// does not promise order across a dead letter).
func (r *Runner) RetryDeadLetter(ctx context.Context, consumer, entityID string) error {
	r.mu.Lock()
	c := r.consumers[consumer]
	r.mu.Unlock()
	if c == nil {
		return fmt.Errorf("retry a dead letter: consumer %q: %w", consumer, ErrNoDeadLetter)
	}
	d, err := r.cfg.DeadLetters.Get(ctx, consumer, entityID)
	if err != nil {
		return fmt.Errorf("retry a dead letter: %w", err)
	}
	hctx, cancel := context.WithTimeout(ctx, c.handlerTimeout(r.cfg.HandlerTimeout))
	defer cancel()
	ignored, err := c.handle(hctx, r.handlerDeps(), d.change())
	r.metrics.handled(consumer, ignored, err)
	if err != nil {
		return fmt.Errorf("retry the dead letter of consumer %q, entity %q: %w: %w", consumer, entityID, ErrHandlerFailed, err)
	}
	return r.cfg.DeadLetters.Delete(ctx, consumer, entityID)
}

// DropDeadLetter removes consumer's dead letter of entity entityID.
func (r *Runner) DropDeadLetter(ctx context.Context, consumer, entityID string) error {
	return r.cfg.DeadLetters.Delete(ctx, consumer, entityID)
}

// DeadLetters lists consumer's dead letters.
func (r *Runner) DeadLetters(ctx context.Context, consumer string) ([]DeadLetter, error) {
	return r.cfg.DeadLetters.List(ctx, consumer)
}

// Has reports whether a consumer with this id was started here.
func (r *Runner) Has(consumer string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.consumers[consumer] != nil
}
