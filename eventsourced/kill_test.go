package eventsourced_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// TestKillOwner: while commands persist through the two other instances
// of three, the owner of an entity's shard is killed (kill -9: its
// leases lapse, nothing is handed over); afterwards every acknowledged
// event is in the journal exactly once, in order, numbered with no gap.
func TestKillOwner(t *testing.T) {
	testenv.Long(t)
	const ids, workers, perWorker = 3, 4, 12
	hosts := make([]*trellis.Host, 3)
	var mu sync.Mutex
	n := 0
	setup := func(h *trellis.Host, r chi.Router) error {
		mu.Lock()
		hosts[n] = h
		n++
		mu.Unlock()
		return startWallets(h, r)
	}
	instances := trellistest.StartInstances(t, 3, setup)
	trellistest.WaitSettled(t, instances...)
	victim := -1
	for i, h := range hosts {
		if _, serving := h.Entities().Cluster.Fence("wallet", "k-0"); serving {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no instance serves k-0's shard")
	}
	var survivors []*trellistest.Service
	for i, ts := range instances {
		if i != victim {
			survivors = append(survivors, ts)
		}
	}
	acked := map[string]bool{} // the notes of acknowledged deposits
	var wg sync.WaitGroup
	started := make(chan struct{}, len(survivors)*workers)
	for s, ts := range survivors {
		for w := range workers {
			wg.Go(func() {
				for k := range perWorker {
					if k == perWorker/3 {
						started <- struct{}{}
					}
					note := fmt.Sprintf("%d-%d-%d", s, w, k)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					_, err := Deposit.Invoke(ctx, ts.Client, fmt.Sprintf("k-%d", k%ids), Deposited{Amount: 1, Note: note})
					cancel()
					if err == nil {
						mu.Lock()
						acked[note] = true
						mu.Unlock()
					}
				}
			})
		}
	}
	for range len(survivors) * workers {
		<-started
	}
	instances[victim].Kill()
	wg.Wait()
	store := hosts[(victim+1)%3].Store.(entities.JournalStore)
	found := map[string]int{}
	for i := range ids {
		id := fmt.Sprintf("k-%d", i)
		journalText(t, store, id) // numbered from 1 with no gap
		events, err := store.Events(t.Context(), "wallet", id, 0, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			var d Deposited
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			found[d.Note]++
		}
	}
	if len(acked) == 0 {
		t.Fatal("no deposit was acknowledged")
	}
	for note := range acked {
		if found[note] != 1 {
			t.Errorf("acknowledged deposit %s is in the journal %d times", note, found[note])
		}
	}
	for note, times := range found {
		if times > 1 {
			t.Errorf("deposit %s is in the journal %d times", note, times)
		}
	}
	t.Logf("%d deposits acknowledged, %d in the journals", len(acked), len(found))
}
