package consumers_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

var flagChaosUpdates = flag.Int("consumers.updates", 10_000,
	"updates of TestConsumerNoChangeLostWithKills (a bigger run: -consumers.updates 100000)")

// chaosLease is the cluster lease of TestConsumerNoChangeLostWithKills:
// short, so that a killed instance's shards are taken over soon.
const chaosLease = 3 * time.Second

// chaosEvent is what happens to the cluster once a share of the updates
// is done.
type chaosEvent struct {
	at   float64 // the share of the updates done
	what string  // kill, join or leave
}

// TestConsumerNoChangeLostWithKills: three instances as one cluster take
// the updates of many counters (-consumers.updates, 10,000 by default),
// while one instance is killed (no goodbye: its shards lapse with its
// lease, and the consumers on the others resume them from their
// checkpoints), one joins (shards move to it), another is killed, one
// more joins, and one leaves (its shards handed over). A write that
// fails is tried again (through another instance); one whose outcome is
// unknown may have counted. Then: the consumer saw every value of every
// counter up to the counter's final value, in order per counter (a value
// seen again only in a replay from a checkpoint), and the replays are
// within the docs' bound: for each kill, the changes handled since the
// killed instance's last checkpoints, about its last 100 ms of them (the
// bound allows 500 ms of the whole cluster's average rate, and 100 more,
// per kill), and none for a graceful move.
func TestConsumerNoChangeLostWithKills(t *testing.T) {
	testenv.Long(t)
	updates := *flagChaosUpdates
	const counters, writers = 200, 8
	rec := newRecorder()
	opts := []trellistest.Option{trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) {
			c.ClusterLease = chaosLease
			c.RequestTimeout = 2 * time.Second
		})}
	instances := trellistest.StartInstances(t, 3, app(rec), opts...)
	trellistest.WaitSettled(t, instances...)
	alive := &liveSet{list: slices.Clone(instances)}

	var done, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for n := 0; ; n++ {
				id := fmt.Sprintf("c-%d", w+writers*(n%(counters/writers)))
				for {
					if done.Load() >= int64(updates) {
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err := counter.Increase.Invoke(ctx, alive.pick(w+n).Host().Client, id, 1)
					cancel()
					if err == nil {
						done.Add(1)
						break
					}
					failed.Add(1) // it may have counted: the final value says
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}

	events := []chaosEvent{{0.15, "kill"}, {0.3, "join"}, {0.45, "kill"}, {0.6, "join"}, {0.8, "leave"}}
	kills := 0
	for _, e := range events {
		trellistest.Eventually(t, 2*time.Minute, fmt.Sprintf("%.0f%% of the updates", 100*e.at), func() bool {
			return done.Load() >= int64(e.at*float64(updates))
		})
		switch e.what {
		case "kill":
			alive.remove(1).Kill()
			kills++
		case "join":
			alive.add(trellistest.JoinInstance(t, instances[0], app(rec), opts...))
		case "leave":
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := alive.remove(1).Shutdown(ctx)
			cancel()
			if err != nil {
				t.Fatalf("leave: %v", err)
			}
		}
		t.Logf("%s at %d updates (%v)", e.what, done.Load(), time.Since(start).Round(time.Millisecond))
	}
	wg.Wait()
	elapsed := time.Since(start)
	last := alive.all()
	trellistest.WaitSettled(t, last...)
	last[0].WaitConsumers(t)

	duplicates, changes := 0, int64(0)
	for i := range counters {
		id := fmt.Sprintf("c-%d", i)
		c, err := counter.Get.Invoke(t.Context(), last[0].Host().Client, id, components.Done{})
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		changes += c.Value
		duplicates += checkSeen(t, id, rec.values(id), c.Value)
	}
	rate := float64(changes) / elapsed.Seconds()
	bound := kills * (int(rate/2) + 100)
	t.Logf("%d changes (%d writes failed and were tried again) in %v (%.0f/s) on 3 instances, %d kills: %d handled twice (bound %d)",
		changes, failed.Load(), elapsed.Round(time.Millisecond), rate, kills, duplicates, bound)
	if duplicates > bound {
		t.Fatalf("%d changes handled twice, over the bound %d", duplicates, bound)
	}
}

// liveSet is the instances still running, for the writers to pick from.
type liveSet struct {
	mu   sync.Mutex
	list []*trellistest.Service
}

func (l *liveSet) pick(i int) *trellistest.Service {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.list[i%len(l.list)]
}

// remove takes the instance at i out of the set and returns it.
func (l *liveSet) remove(i int) *trellistest.Service {
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := l.list[i]
	l.list = slices.Delete(l.list, i, i+1)
	return ts
}

func (l *liveSet) add(ts *trellistest.Service) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, ts)
}

func (l *liveSet) all() []*trellistest.Service {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}
