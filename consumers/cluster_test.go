package consumers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/trellis-go/trellis/trellistest"
)

// TestConsumerClusterNoChangeLost: three instances as one cluster, with
// writes to many counters while one instance leaves (its shards move to
// the others, their consumption resumes there from the checkpoints): the
// consumer sees every value of every counter, in order per counter (a
// value seen again only as a replay, which starts over from a checkpoint
// and goes up one by one), and the replays stay within the docs' bound.
func TestConsumerClusterNoChangeLost(t *testing.T) {
	const counters, rounds, writers = 60, 20, 4
	rec := newRecorder()
	instances := trellistest.StartInstances(t, 3, app(rec))
	trellistest.WaitSettled(t, instances...)
	var wg sync.WaitGroup
	half := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				if r == rounds/2 && w == 0 {
					close(half)
				}
				for i := w; i < counters; i += writers {
					increase(t, instances[0], fmt.Sprintf("c-%d", i))
				}
			}
		})
	}
	<-half
	if err := instances[2].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	instances[0].WaitConsumers(t)

	duplicates := 0
	for i := range counters {
		id := fmt.Sprintf("c-%d", i)
		seen := rec.values(id)
		highest := int64(0)
		for j, v := range seen {
			switch {
			case v == highest+1:
				highest = v
			case v <= highest && (j == 0 || v == seen[j-1]+1 || v < seen[j-1]):
				duplicates++ // a replay from a checkpoint
			default:
				t.Fatalf("%s seen as %v: %d out of order", id, seen, v)
			}
		}
		if highest != rounds {
			t.Fatalf("%s seen as %v: up to %d, want every value up to %d", id, seen, highest, rounds)
		}
	}
	t.Logf("%d changes, %d handled twice", counters*rounds, duplicates)
	// A move replays at most the changes read after the shard's last
	// checkpoint: one batch per shard and consumer.
	if limit := 256 * 100; duplicates > limit {
		t.Fatalf("%d duplicates, over %d", duplicates, limit)
	}
}
