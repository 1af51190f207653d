package trellis_test

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/trellistest"
)

// hop is a message to a sharded entity of the test app: which instance
// sent it, and its number.
type hop struct {
	From int `json:"from"`
	N    int `json:"n"`
}

var hopKey = runtime.NewEntityTypeKey[hop]("cluster-sharding-hops")

// hopLog records what the app's entities handled, on every instance.
type hopLog struct {
	mu     sync.Mutex
	ranOn  map[string]map[*runtime.System]bool // entity id -> the systems it ran on
	got    map[hop]int                         // each message's deliveries
	probes map[string]bool                     // entity id + sender: a probe arrived
}

func (l *hopLog) record(sys *runtime.System, id string, m hop) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.N < 0 {
		l.probes[fmt.Sprint(id, "/", m.From)] = true
		return
	}
	if l.ranOn[id] == nil {
		l.ranOn[id] = map[*runtime.System]bool{}
	}
	l.ranOn[id][sys] = true
	l.got[m]++
}

// TestClusterShardedEntityFromEveryInstance: an app's sharded entity type
// (runtime.InitSharding in its setup) on a cluster of two instances runs
// each entity on the instance that owns its shard, and both instances
// reach every entity: each message arrives once, and each entity runs on
// one instance only, some on each.
func TestClusterShardedEntityFromEveryInstance(t *testing.T) {
	const entities, perSender = 20, 25
	log := &hopLog{ranOn: map[string]map[*runtime.System]bool{}, got: map[hop]int{}, probes: map[string]bool{}}
	var mu sync.Mutex
	regions := map[*runtime.System]*runtime.Sharding[hop]{}
	setup := func(h *trellis.Host, _ chi.Router) error {
		region, err := runtime.InitSharding(h.System, runtime.Entity[hop]{Key: hopKey, Create: func(id string) runtime.Behavior[hop] {
			return runtime.ReceiveFunc(func(ctx *runtime.Context[hop], m hop) { log.record(ctx.System(), id, m) })
		}})
		mu.Lock()
		regions[h.System] = region
		mu.Unlock()
		return err
	}
	instances := trellistest.StartInstances(t, 2, setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	trellistest.WaitSettled(t, instances...)
	region := func(i int) *runtime.Sharding[hop] {
		mu.Lock()
		defer mu.Unlock()
		return regions[instances[i].Host().System]
	}
	id := func(e int) string { return fmt.Sprintf("e%d", e) }

	// Each instance's table of owners follows the rebalancing a poll
	// later: probes go until every entity has heard from both.
	trellistest.Eventually(t, 10*time.Second, "every entity reached from both instances", func() bool {
		all := true
		for from := range instances {
			for e := range entities {
				log.mu.Lock()
				ok := log.probes[fmt.Sprint(id(e), "/", from)]
				log.mu.Unlock()
				if !ok {
					all = false
					region(from).Tell(id(e), hop{From: from, N: -1})
				}
			}
		}
		return all
	})
	for n := range perSender {
		for from := range instances {
			for e := range entities {
				region(from).Tell(id(e), hop{From: from, N: n*entities + e})
			}
		}
	}
	total := len(instances) * entities * perSender
	trellistest.Eventually(t, 10*time.Second, fmt.Sprintf("%d messages handled", total), func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.got) == total
	})

	log.mu.Lock()
	defer log.mu.Unlock()
	for m, n := range log.got {
		if n != 1 {
			t.Errorf("message %+v handled %d times", m, n)
		}
	}
	bySystem := map[*runtime.System]int{}
	for e, systems := range log.ranOn {
		if len(systems) != 1 {
			t.Errorf("entity %s ran on %d instances", e, len(systems))
		}
		for sys := range systems {
			bySystem[sys]++
		}
	}
	if len(bySystem) != len(instances) {
		t.Errorf("the entities ran on %d instances, want them spread over %d", len(bySystem), len(instances))
	}
}
