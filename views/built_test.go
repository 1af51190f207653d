package views

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
)

type builtItem struct {
	Name string `json:"name"`
}

var (
	builtItems = entities.Define("built-test-item", func(string) builtItem { return builtItem{} })
	builtView  = Define("built-test-items", builtItems, func(c Change[builtItem]) Update[builtItem] {
		if c.Deleted {
			return Delete[builtItem]()
		}
		return Upsert(c.State)
	})
	builtAll = builtView.Query("all")
)

// heldShards serves every shard but one until it is let go.
type heldShards struct {
	held int
	gone atomic.Bool
}

func (s *heldShards) Serving(shard int) (cluster.Fence, bool) {
	return cluster.Fence{Shard: shard, Incarnation: "test", Epoch: 1}, shard != s.held || s.gone.Load()
}

// TestStreamWaitsForTheBuilds: a stream begun while a shard of a new view
// is not built yet (its change log holds changes from before the view)
// sends its rows once the shard is built, with every row, and no reset
// follows; Built tells the same. Past buildWait it would send the rows it
// has; the shard here is built well within it.
func TestStreamWaitsForTheBuilds(t *testing.T) {
	ctx := t.Context()
	log := entities.NewMemoryStore()
	const id = "item-1"
	shard := cluster.ShardOf(builtItems.ComponentID(), id)
	// Another consumer of the shard: the log records its changes before
	// the view's projector first opens it.
	if _, err := log.Register(ctx, "another", shard); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(builtItem{Name: "first"})
	if _, err := log.Save(ctx, builtItems.ComponentID(), id, data, 0); err != nil {
		t.Fatal(err)
	}
	shards := &heldShards{held: shard}
	r, err := NewRunner(Config{Log: log, Store: NewMemoryStore(), Shards: shards, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := builtView.Start(r); err != nil {
		t.Fatal(err)
	}
	r.Start(ctx)
	t.Cleanup(func() { r.Stop(context.Background()) })

	f, err := r.Follow(ctx, builtView.Name(), builtAll.Name(), Request{}, "")
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan Event, 64)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		ran <- f.Run(runCtx, func(evs []Event) error {
			for _, ev := range evs {
				events <- ev
			}
			return nil
		})
	}()
	t.Cleanup(func() { stop(); <-ran })

	select {
	case ev := <-events:
		t.Fatalf("a %q event while shard %d is not built", ev.Kind, shard)
	case <-time.After(200 * time.Millisecond): // the wait is still under way: nothing was sent
	}
	if built, err := r.Built(ctx, builtView.Name()); err != nil || built {
		t.Fatalf("Built: %v, %v while shard %d is not built", built, err, shard)
	}
	shards.gone.Store(true)

	next := func() Event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10 s")
			return Event{}
		}
	}
	if ev := next(); ev.Kind != "row" || ev.EntityID != id {
		t.Fatalf("first event %+v, want %s's row", ev, id)
	}
	if ev := next(); ev.Kind != "ready" {
		t.Fatalf("second event %+v, want ready", ev)
	}
	data, _ = json.Marshal(builtItem{Name: "second"})
	if _, err := log.Save(ctx, builtItems.ComponentID(), id, data, 1); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Kind != "changed" || ev.EntityID != id {
		t.Fatalf("after a write, event %+v, want %s changed (no reset)", ev, id)
	}
	if built, err := r.Built(ctx, builtView.Name()); err != nil || !built {
		t.Fatalf("Built: %v, %v once every shard is", built, err)
	}
}
