package eventsourced_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// startWallets is a service setup with Wallets on the host's entities.
func startWallets(h *trellis.Host, _ chi.Router) error {
	_, err := Wallets.Start(h.Entities())
	return err
}

// clusterTargets start 3 instances as one cluster on one Redis and on a
// Redis Cluster.
var clusterTargets = []struct {
	name  string
	start func(t *testing.T) []*trellistest.Service
}{
	{"redis", func(t *testing.T) []*trellistest.Service { return trellistest.StartInstances(t, 3, startWallets) }},
	{"redis-cluster", func(t *testing.T) []*trellistest.Service {
		prefix := "trellis-test-" + rand.Text()
		client := testenv.RedisCluster(t)
		t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
		url := testenv.RedisClusterURL(t)
		opts := []trellistest.Option{trellistest.WithStorePrefix(prefix),
			trellistest.WithConfig(func(c *trellis.Config) { c.RedisURL, c.RedisClusterURL = "", url })}
		return trellistest.StartInstances(t, 3, startWallets, opts...)
	}},
}

// TestCluster: commands sent at once through 3 instances reach each
// entity's owner and persist; every acknowledged event is in the journal
// once, numbered from 1 with no gap, and the state loaded anew on any
// instance is the journal's.
func TestCluster(t *testing.T) {
	const entitiesN, workers, perWorker = 4, 4, 8
	for _, target := range clusterTargets {
		t.Run(target.name, func(t *testing.T) {
			instances := target.start(t)
			trellistest.WaitSettled(t, instances...)
			ctx := context.Background()
			var mu sync.Mutex
			acked := map[string]int{} // entity → sum of acknowledged deposits
			var wg sync.WaitGroup
			for i, ts := range instances {
				for w := range workers {
					wg.Go(func() {
						for k := range perWorker {
							id := fmt.Sprintf("w-%d", (w+k)%entitiesN)
							amount := 1 + i*100 + w*10 + k
							if _, err := Deposit.Invoke(ctx, ts.Client, id, Deposited{Amount: amount}); err != nil {
								t.Errorf("deposit on %s through instance %d: %v", id, i, err)
								continue
							}
							mu.Lock()
							acked[id] += amount
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			store, ok := instances[0].Host().Store.(entities.JournalStore)
			if !ok {
				t.Fatalf("the service's store %T keeps no journals", instances[0].Host().Store)
			}
			total := 0
			for e := range entitiesN {
				id := fmt.Sprintf("w-%d", e)
				journalText(t, store, id) // numbered from 1 with no gap
				want := fullReplay(t, store, id)
				if want.Balance != acked[id] {
					t.Errorf("%s: the journal sums to %d, the acknowledged deposits to %d", id, want.Balance, acked[id])
				}
				total += len(want.Notes)
				for i, ts := range instances {
					got, err := Balance.Invoke(ctx, ts.Client, id, done)
					if err != nil || got.Balance != want.Balance {
						t.Errorf("%s through instance %d: %+v, %v; want balance %d", id, i, got, err, want.Balance)
					}
				}
			}
			if total != len(instances)*workers*perWorker {
				t.Errorf("%d events in the journals, %d deposits sent", total, len(instances)*workers*perWorker)
			}
		})
	}
}
