package entityhost_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/cluster/entityhost"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }

// testLease is the members' lease: short, so that a takeover takes a few
// seconds, and long enough for a loaded machine to renew in time.
const testLease = 2 * time.Second

var testSecret = []byte("entityhost-test-secret-0123456789abcdef")

// discard is the logger of everything the tests start.
var discard = slog.New(slog.DiscardHandler)

// Counter is the test entity: a value that Add raises.
type Counter struct {
	Value int `json:"value"`
}

var (
	Counters = entities.Define("counter", func(string) Counter { return Counter{} })
	Add      = entities.Command(Counters, "add",
		func(ctx *entities.Ctx[Counter, Counter], c Counter, n int) entities.Effect[Counter, Counter] {
			if n <= 0 {
				return ctx.Invalid("add %d: must be positive", n)
			}
			c.Value += n
			return ctx.UpdateState(c).ThenReply(c)
		})
	Get = entities.Command(Counters, "get",
		func(ctx *entities.Ctx[Counter, Counter], c Counter, _ components.Done) entities.Effect[Counter, Counter] {
			return ctx.Reply(c)
		})
)

// instance is one service instance of a test cluster: its membership, its
// transport, its runtime and the Counters entity started with its Host.
type instance struct {
	id        string
	host      *entityhost.Host
	server    *peer.Server
	client    *components.Client
	store     *entities.ShardedRedisStore
	cut       *renewalCut
	paused    *pausable    // the Cluster its entities run with
	storeCmds atomic.Int64 // commands the store's Redis client sent
	fault     storeFault   // of the store's Redis client
	prefix    string
	hold      holdShard    // of the membership's Redis client
	waits     atomic.Int64 // waits for a shard's owner its peer calls began
}

// startCluster starts n instances on the test Redis under a prefix of
// their own and waits until they serve every shard between them.
func startCluster(t *testing.T, n int) []*instance {
	t.Helper()
	url := testenv.RedisURL(t)
	prefix := "entityhost-" + rand.Text()[:8]
	cleanup := redisClient(t, url)
	t.Cleanup(func() { testenv.DeleteKeys(t, cleanup, keyspace.Must(prefix).Pattern()) })
	insts := make([]*instance, n)
	for i := range insts {
		insts[i] = startInstance(t, url, prefix, string(rune('a'+i)))
	}
	waitServed(t, insts...)
	return insts
}

// startInstance starts instance id and stops it when the test ends.
func startInstance(t *testing.T, url, prefix, id string) *instance {
	t.Helper()
	inst := &instance{id: id, prefix: prefix}
	var handler atomic.Pointer[entityhost.Host]
	countWaits := cluster.WaitHook(func(int) func() { inst.waits.Add(1); return func() {} })
	srv, err := peer.NewServer(peer.ServerConfig{Secret: testSecret, Logger: discard,
		Handler: func(ctx context.Context, c peer.Call) (peer.Reply, error) {
			return handler.Load().Handle(cluster.WithWaitHook(ctx, countWaits), c)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	inst.server = srv
	memberClient := redisClient(t, url)
	inst.cut = &renewalCut{key: keyspace.Must(prefix).Tagged("cluster", "members", "member:"+id)}
	memberClient.AddHook(inst.cut)
	memberClient.AddHook(&inst.hold)
	m, err := cluster.Join(t.Context(), cluster.Config{Client: memberClient, Prefix: prefix, ID: id,
		Addr: srv.Addr(), Lease: testLease, Margin: 100 * time.Millisecond, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	peers, err := peer.NewClient(peer.ClientConfig{Secret: testSecret, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	reg := components.NewRegistry()
	inst.host, err = entityhost.New(entityhost.Config{Member: m, Peers: peers, Registry: reg, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	handler.Store(inst.host)
	inst.paused = &pausable{Host: inst.host}
	storeClient := redisClient(t, url)
	storeClient.AddHook(counting{&inst.storeCmds})
	storeClient.AddHook(&inst.fault)
	inst.store = entities.NewShardedRedisStore(storeClient, prefix)
	sys := runtime.NewSystem(id, runtime.WithLogger(discard))
	inst.client = components.NewClient(reg)
	if _, err := Counters.Start(entities.Host{System: sys, Client: inst.client, Store: inst.store, Cluster: inst.paused}); err != nil {
		t.Fatal(err)
	}
	inst.host.Rebalancer().Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		inst.host.Rebalancer().Shutdown()
		_ = srv.Shutdown(ctx)
		_ = peers.Close()
		_ = sys.Shutdown(ctx)
		_ = m.Leave(ctx)
	})
	return inst
}

// kill makes the instance vanish without a word: no more renewals (its
// key expires in Redis), no more moves, and its transport closed. Its
// actors live on, but its writes are fenced once others take its shards.
func (inst *instance) kill(t *testing.T) {
	t.Helper()
	inst.host.Rebalancer().Shutdown()
	inst.cut.on.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // close every connection now, in-flight calls included
	_ = inst.server.Shutdown(ctx)
}

// redisClient is a client of its own for the Redis at url, closed when
// the test ends.
func redisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitServed waits until insts serve every shard between them, each shard
// by one instance and each instance its share, for at most a lease and a
// few rebalancing passes.
func waitServed(t *testing.T, insts ...*instance) {
	t.Helper()
	testenv.Eventually(t, testLease*2+5*time.Second, "every shard served by exactly one instance, each its share", func() bool {
		share := make(map[*instance]int, len(insts))
		for shard := range cluster.NumShards {
			s := servers(shard, insts)
			if len(s) != 1 {
				return false
			}
			share[s[0]]++
		}
		// The first to start takes every shard and gives the others their
		// share at its next pass: settled is when each has its share.
		for _, inst := range insts {
			if share[inst] < cluster.NumShards/len(insts)-1 {
				return false
			}
		}
		return true
	})
}

// servers are the instances that serve shard now.
func servers(shard int, insts []*instance) []*instance {
	var out []*instance
	for _, inst := range insts {
		if _, ok := inst.host.Rebalancer().Serving(shard); ok {
			out = append(out, inst)
		}
	}
	return out
}

// entityServedBy returns the id of a counter whose shard inst serves.
func entityServedBy(t *testing.T, inst *instance) string {
	t.Helper()
	return entitiesServedBy(t, inst, 1)[0]
}

// entitiesServedBy returns the ids of n counters whose shards inst serves.
func entitiesServedBy(t *testing.T, inst *instance, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < 10_000 && len(ids) < n; i++ {
		id := fmt.Sprintf("c-%d", i)
		if _, ok := inst.host.Fence("counter", id); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) < n {
		t.Fatalf("%s serves the shards of %d of the first 10000 counters, want %d", inst.id, len(ids), n)
	}
	return ids
}

// pausable is the Host as the entities see it, except that after wake its
// next command runs as if the instance had been paused just before its
// lease ran out: Route admits it here and Fence answers the old fence,
// once each, so that the entity writes under that fence.
type pausable struct {
	*entityhost.Host
	wake   atomic.Pointer[cluster.Fence] // set by the test
	stale  atomic.Pointer[cluster.Fence] // the next Fence's answer
	routes atomic.Int64                  // calls of Route
}

func (p *pausable) Route(ctx context.Context, entityType, id string) (string, func(), error) {
	p.routes.Add(1)
	if f := p.wake.Swap(nil); f != nil {
		p.stale.Store(f)
		return "", func() {}, nil
	}
	return p.Host.Route(ctx, entityType, id)
}

func (p *pausable) Fence(entityType, id string) (cluster.Fence, bool) {
	if f := p.stale.Swap(nil); f != nil {
		return *f, true
	}
	return p.Host.Fence(entityType, id)
}

// renewalCut fails every command that names the key of its member while
// on: the member's renewals (and leave) fail, its key expires in Redis,
// and its reads of the table go on.
type renewalCut struct {
	key string
	on  atomic.Bool
}

var errCut = errors.New("test: renewals cut")

func (h *renewalCut) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *renewalCut) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && slices.Contains(cmd.Args(), any(h.key)) {
			cmd.SetErr(errCut)
			return errCut
		}
		return next(ctx, cmd)
	}
}

func (h *renewalCut) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// counting counts the commands a client sends.
type counting struct{ n *atomic.Int64 }

func (c counting) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c counting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c counting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// storeFault fails the next write script that a store's Redis client
// sends once armed (once per arming): faultLoseReply lets Redis run it and
// then loses the reply, as a connection that breaks after the command was
// sent; faultRefuse answers LOADING without sending it, as a Redis that
// restarts.
type storeFault struct{ mode atomic.Int32 }

const (
	faultNone int32 = iota
	faultLoseReply
	faultRefuse
)

// loadingReply is Redis's LOADING reply, as go-redis returns it.
type loadingReply struct{}

func (loadingReply) Error() string { return "LOADING Redis is loading the dataset in memory" }
func (loadingReply) RedisError()   {}

func (f *storeFault) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *storeFault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		switch f.mode.Load() {
		case faultRefuse:
			if f.mode.CompareAndSwap(faultRefuse, faultNone) {
				cmd.SetErr(loadingReply{})
				return cmd.Err()
			}
		case faultLoseReply:
			if err := next(ctx, cmd); err != nil {
				return err // not run (a script not loaded yet, say): the next send
			}
			if f.mode.CompareAndSwap(faultLoseReply, faultNone) {
				cmd.SetErr(io.ErrUnexpectedEOF)
				return cmd.Err()
			}
			return nil
		}
		return next(ctx, cmd)
	}
}

func (f *storeFault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
