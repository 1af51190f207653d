package eventsourced_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/eventsourced"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// TestSweeper: on every store, with no write after the snapshot, the
// sweep drops the events a snapshot covers once it is as old as the
// retention, and nothing else (a journal without a snapshot, the events
// after it, a snapshot younger than the period), counting what it
// dropped; a second sweep drops nothing more, and the state loads the
// same after. The sweeps are timed by a fake clock of their own, the
// snapshots' age by the entities'.
func TestSweeper(t *testing.T) {
	for name, makeStore := range storeMakers() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := makeStore(t)
			n := startTally(t, store)
			adds := map[string]int{"t-old": 7, "t-none": 2} // snapshots after 3 and 6; none
			for id, k := range adds {
				for i := range k {
					if _, err := Add.Invoke(ctx, n.client, id, i+1); err != nil {
						t.Fatal(err)
					}
				}
			}
			sweeps := clockwork.NewFakeClock()
			sw := eventsourced.NewSweeper(eventsourced.SweeperOptions{Registry: n.client.Registry(), Clock: sweeps, Every: time.Minute})
			if err := sw.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := sw.Shutdown(context.Background()); err != nil {
					t.Error(err)
				}
			})
			sweep := func() {
				t.Helper()
				wait, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := sweeps.BlockUntilContext(wait, 1); err != nil {
					t.Fatalf("the sweeper waits for its next sweep: %v", err)
				}
				sweeps.Advance(time.Minute)
				// It waits for the next one once this one is done.
				if err := sweeps.BlockUntilContext(wait, 1); err != nil {
					t.Fatalf("the sweep ends: %v", err)
				}
			}
			kept := func(id string) string {
				t.Helper()
				events, err := store.Events(ctx, "tally", id, 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				var seqs []string
				for _, e := range events {
					seqs = append(seqs, fmt.Sprint(e.Seq))
				}
				return strings.Join(seqs, " ")
			}
			check := func(when string, want map[string]string, trimmed int) {
				t.Helper()
				for id, w := range want {
					if got := kept(id); got != w {
						t.Errorf("%s: %s keeps %q, want %q", when, id, got, w)
					}
				}
				if got := testutil.CollectAndCount(sw.Collector()); trimmed == 0 && got != 0 {
					t.Errorf("%s: %d series of trimmed events, want none", when, got)
				} else if trimmed > 0 {
					if got := testutil.ToFloat64(sw.Collector()); got != float64(trimmed) {
						t.Errorf("%s: %v events counted trimmed, want %d", when, got, trimmed)
					}
				}
			}
			whole := map[string]string{"t-old": "1 2 3 4 5 6 7", "t-none": "1 2"}

			n.clock.Advance(time.Hour - time.Millisecond)
			sweep()
			check("a snapshot younger than the period", whole, 0)

			n.clock.Advance(time.Millisecond)
			sweep()
			check("a snapshot as old as the period", map[string]string{"t-old": "7", "t-none": "1 2"}, 6)
			sweep()
			check("a second sweep", map[string]string{"t-old": "7", "t-none": "1 2"}, 6)

			if sum, err := Sum.Invoke(ctx, startTally(t, store).client, "t-old", components.Done{}); err != nil || sum != 28 {
				t.Fatalf("sum loaded after the sweep = %d, %v; want 28", sum, err)
			}
		})
	}
}

// TestSweeperStopsAtShutdown: Shutdown returns once the sweeper stopped,
// a second Shutdown and a Shutdown before Start do nothing.
func TestSweeperStopsAtShutdown(t *testing.T) {
	n := startTally(t, entities.NewMemoryStore())
	sw := eventsourced.NewSweeper(eventsourced.SweeperOptions{Registry: n.client.Registry(), Clock: clockwork.NewFakeClock()})
	ctx := context.Background()
	for _, step := range []func(context.Context) error{sw.Shutdown, sw.Start, sw.Start, sw.Shutdown, sw.Shutdown} {
		if err := step(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// startTallies is a service setup with Tallies on the host's entities.
func startTallies(h *trellis.Host, _ chi.Router) error {
	_, err := Tallies.Start(h.Entities())
	return err
}

// TestSweeperInService: the service sweeps the journals of the types its
// setup started, on the shard's owner under its fence: in a cluster of 3
// on one Redis, once the snapshot is older than the retention, the events
// it covers are dropped, by one instance, without a further write, and
// the instances' series count them once.
func TestSweeperInService(t *testing.T) {
	instances := trellistest.StartInstances(t, 3, startTallies)
	trellistest.WaitSettled(t, instances...)
	ctx := context.Background()
	for i := range 4 { // a snapshot after 3
		if _, err := Add.Invoke(ctx, instances[i%3].Client, "t-1", i+1); err != nil {
			t.Fatal(err)
		}
	}
	store := instances[0].Host().Store.(entities.JournalStore)
	testenv.Eventually(t, time.Minute, "the sweep drops events 1 to 3", func() bool {
		for _, ts := range instances {
			ts.Clock.Advance(eventsourced.DefaultSweepEvery)
		}
		events, err := store.Events(ctx, "tally", "t-1", 0, 1)
		return err == nil && len(events) == 1 && events[0].Seq == 4
	})
	const series = `trellis_eventsourced_trimmed_events_total{entity_type="tally"} `
	total := 0
	for _, ts := range instances {
		for line := range strings.Lines(string(ts.Get(t, "/metrics").Body)) {
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), series); ok {
				v, err := strconv.Atoi(n)
				if err != nil {
					t.Fatalf("%s%s: %v", series, n, err)
				}
				total += v
			}
		}
	}
	if total != 3 {
		t.Fatalf("the instances count %d events trimmed, want 3", total)
	}
}
