package entities_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestShardedEntityReadsLegacyKeyOnce: an entity on ShardedRedisStore
// reads the key of the layout before shards with its load only. With no
// legacy key, its create is the load and one script, and its delete
// deletes no legacy key; over a legacy tombstone, its create still gets a
// revision above the tombstone's and deletes it; a live legacy state is
// read and moved by its next write.
func TestShardedEntityReadsLegacyKeyOnce(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
	storeClient := redis.NewClient(client.Options())
	t.Cleanup(func() { _ = storeClient.Close() })
	cmds := &commandLog{}
	storeClient.AddHook(cmds)
	store := entities.NewShardedRedisStore(storeClient, prefix)
	old := entities.NewRedisStore(client, prefix)
	o := joinOwner(t, client, prefix, "owner")
	legacyKey := func(id string) string { return prefix + ":entity:4:acct:" + id }
	// on starts Accts on the store, serving the shard of entity id.
	on := func(id string) *node {
		f := o.fence(t, cluster.ShardOf("acct", id))
		return startNode(t, store, func(h *entities.Host) {
			h.Cluster = &fakeCluster{fence: f, serving: true, routes: []string{""}}
		})
	}

	n := on("new")
	cmds.reset()
	if a, err := Deposit.Invoke(ctx, n.client, "new", 5); err != nil || a.Balance != 5 {
		t.Fatalf("deposit into a new entity = %+v, %v", a, err)
	}
	// A script not cached yet goes as EVALSHA, then EVAL.
	if got := strings.Join(cmds.names(), " "); got != "hmget hmget evalsha" && got != "hmget hmget evalsha eval" {
		t.Fatalf("a create made the commands %s, want the load's two HMGETs in one pipeline, then one script", got)
	}
	cmds.reset()
	if _, err := Close.Invoke(ctx, n.client, "new", done); err != nil {
		t.Fatal(err)
	}
	if got := cmds.names(); slices.Contains(got, "del") {
		t.Fatalf("a delete with no legacy key made the commands %v, want no DEL", got)
	}

	rev := mustSave(t, ctx, old, "acct", "gone", `{"id":"gone","balance":1}`, 0)
	rev = mustSave(t, ctx, old, "acct", "gone", `{"id":"gone","balance":2}`, rev)
	mustDelete(t, ctx, old, "acct", "gone", rev)
	n = on("gone")
	if a, err := Deposit.Invoke(ctx, n.client, "gone", 5); err != nil || a.Balance != 5 {
		t.Fatalf("deposit over a legacy tombstone = %+v, %v; want a new entity of balance 5", a, err)
	}
	if got, err := store.Load(ctx, "acct", "gone"); err != nil || got.Revision <= rev {
		t.Fatalf("created over a legacy tombstone of revision %d: revision %d, %v; want above it", rev, got.Revision, err)
	}
	wantNoKey(t, ctx, client, legacyKey("gone"))

	mustSave(t, ctx, old, "acct", "live", `{"id":"live","balance":7}`, 0)
	n = on("live")
	if a, err := Deposit.Invoke(ctx, n.client, "live", 1); err != nil || a.Balance != 8 {
		t.Fatalf("deposit into a legacy state of balance 7 = %+v, %v; want 8", a, err)
	}
	wantNoKey(t, ctx, client, legacyKey("live"))
}

// commandLog is a go-redis hook that logs the names of the commands a
// client sends, pipelined ones each, but those that set up a new
// connection.
type commandLog struct {
	mu  sync.Mutex
	log []string
}

func (c *commandLog) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		switch name := cmd.Name(); name {
		case "hello", "auth", "select", "client":
		default:
			c.log = append(c.log, name)
		}
	}
}

func (c *commandLog) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = nil
}

func (c *commandLog) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

func (c *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}
