package eventsourced_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/eventsourced"
)

// Tally is a flat state: commands get plain copies of it.
type Tally struct{ Sum int }

type Added struct{ N int }

func applyTally(t Tally, e any) Tally {
	if a, ok := e.(Added); ok {
		t.Sum += a.N
	}
	return t
}

var (
	// Tallies drop what a snapshot older than an hour covers.
	Tallies = eventsourced.Define("tally", func(string) Tally { return Tally{} }, applyTally,
		eventsourced.SnapshotEvery(3), eventsourced.DropCoveredAfter(time.Hour))
	Add = eventsourced.Command(Tallies, "add",
		func(ctx *eventsourced.Ctx[Tally, int], t Tally, n int) eventsourced.Effect[Tally, int] {
			return ctx.Persist(Added{N: n}).ThenReply(func(t Tally) int { return t.Sum })
		})
	Sum = eventsourced.Command(Tallies, "sum",
		func(ctx *eventsourced.Ctx[Tally, int], t Tally, _ components.Done) eventsourced.Effect[Tally, int] {
			return ctx.Reply(t.Sum)
		})
)

func init() { eventsourced.Event[Added](Tallies, "added") }

// TestRetention: events a snapshot covers are dropped once it is older
// than the period, at the next write, and nothing else is; the state
// loads the same after.
func TestRetention(t *testing.T) {
	cases := []struct {
		name    string
		adds    int           // before the wait
		wait    time.Duration // then one more add
		journal string        // the events kept
	}{
		{"YoungSnapshotKeepsAll", 4, 59 * time.Minute, "1 2 3 4 5"},
		{"OldSnapshotDropsWhatItCovers", 4, time.Hour, "4 5"},
		{"NoSnapshotYet", 2, 2 * time.Hour, "1 2 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store := entities.NewMemoryStore()
			n := startTally(t, store)
			for i := range c.adds {
				if _, err := Add.Invoke(ctx, n.client, "t-1", i+1); err != nil {
					t.Fatal(err)
				}
			}
			n.clock.Advance(c.wait)
			if _, err := Add.Invoke(ctx, n.client, "t-1", 10); err != nil {
				t.Fatal(err)
			}
			events, err := store.Events(ctx, "tally", "t-1", 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, e := range events {
				got += fmt.Sprint(e.Seq) + " "
			}
			if got != c.journal+" " {
				t.Fatalf("events kept: %s; want %s", got, c.journal)
			}
			want := c.adds*(c.adds+1)/2 + 10
			if sum, err := Sum.Invoke(ctx, startTally(t, store).client, "t-1", components.Done{}); err != nil || sum != want {
				t.Fatalf("sum loaded after the trim = %d, %v; want %d", sum, err, want)
			}
		})
	}
}

func startTally(t *testing.T, store entities.Store) *node {
	t.Helper()
	n := startNode(t, store)
	if _, err := Tallies.Start(eventsourced.Host{System: n.sys, Client: n.client, Store: store}); err != nil {
		t.Fatal(err)
	}
	return n
}
