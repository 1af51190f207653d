package consumers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/trellis-go/trellis/trellistest"
)

// TestConsumerClusterNoChangeLost: instances as one cluster, with writes
// to many counters while a third instance joins (shards move to it) and
// then one leaves (its shards move to the others); consumption resumes on
// each shard's new owner from the checkpoints. The
// consumer sees every value of every counter, in order per counter (a
// value seen again only as a replay, which starts over from a checkpoint
// and goes up one by one), and the replays stay within the docs' bound.
func TestConsumerClusterNoChangeLost(t *testing.T) {
	trellistest.Long(t)
	const counters, rounds, writers = 100, 30, 4
	rec := newRecorder()
	instances := trellistest.StartInstances(t, 2, app(rec))
	trellistest.WaitSettled(t, instances...)
	first := instances[0] // the writers' way in; it stays
	var wg sync.WaitGroup
	third, twoThirds := make(chan struct{}), make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				switch {
				case w > 0:
				case r == rounds/3:
					close(third)
				case r == 2*rounds/3:
					close(twoThirds)
				}
				for i := w; i < counters; i += writers {
					increase(t, first, fmt.Sprintf("c-%d", i))
				}
			}
		})
	}
	<-third
	instances = append(instances, trellistest.JoinInstance(t, first, app(rec)))
	trellistest.WaitSettled(t, instances...)
	<-twoThirds
	if err := instances[1].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	first.WaitConsumers(t)

	duplicates := 0
	for i := range counters {
		id := fmt.Sprintf("c-%d", i)
		duplicates += checkSeen(t, id, rec.values(id), rounds)
	}
	t.Logf("%d changes, %d handled twice", counters*rounds, duplicates)
	// A move replays at most the changes read after the shard's last
	// checkpoint: one batch per shard and consumer.
	if limit := 256 * 100; duplicates > limit {
		t.Fatalf("%d duplicates, over %d", duplicates, limit)
	}
}
