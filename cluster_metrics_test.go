package trellis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

// TestClusterForwardMetrics: increases of a counter sent to the instance
// that does not own it are each counted once on it as a forward ("ok",
// and in the round-trip histogram) and once on the owner as served; the
// increases sent to the owner count as neither.
func TestClusterForwardMetrics(t *testing.T) {
	insts := startCounters(t, 2)
	const owner, forwarder = 0, 1
	id := keysOwnedBy(t, owners(t, insts), []int{owner})[0]
	comp := counter.Entity.ComponentID()
	ok := fmt.Sprintf(`trellis_cluster_forwards_total{component=%q,outcome="ok"}`, comp)
	took := fmt.Sprintf(`trellis_cluster_forward_duration_seconds_count{component=%q}`, comp)
	served := fmt.Sprintf(`trellis_cluster_forwards_served_total{component=%q}`, comp)
	read := func() [4]float64 {
		return [4]float64{series(t, insts[forwarder], ok), series(t, insts[forwarder], took),
			series(t, insts[owner], served), series(t, insts[owner], ok) + series(t, insts[forwarder], served)}
	}

	before := read()
	const forwarded, local = 7, 3
	for range forwarded {
		fixture.Increase(t, insts[forwarder], id)
	}
	for range local {
		fixture.Increase(t, insts[owner], id)
	}
	after := read()
	for i, what := range []string{"forwards ok on the forwarder", "forward round trips on the forwarder",
		"forwards served by the owner", "forwards the other way"} {
		want := float64(forwarded)
		if i == 3 {
			want = 0
		}
		if d := after[i] - before[i]; d != want {
			t.Errorf("%s moved by %v, want %v", what, d, want)
		}
	}
}

// TestClusterForwardToKilledOwner: the owner of a counter is killed;
// increases through the other instance, until one succeeds, are each
// counted as one forward: one whose answer was lost ("unknown": the
// increase fails as outcome unknown; the connection broke under it), or
// one that surely did not run ("unavailable": the owner refuses new
// connections; the instance waits for the shard's next owner, itself, and
// the increase succeeds), and as nothing else.
func TestClusterForwardToKilledOwner(t *testing.T) {
	testenv.Long(t)
	app := &fixture.CounterApp{}
	insts := trellistest.StartInstances(t, 2, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = faultLease }))
	trellistest.WaitSettled(t, insts...)
	const owner, forwarder = 0, 1
	id := keysOwnedBy(t, owners(t, insts), []int{owner})[0]
	fixture.Increase(t, insts[forwarder], id) // the connection to the owner is up
	outcomes := []string{"ok", "refused", "moved", "unavailable", "unknown", "deadline", "canceled"}
	read := func() map[string]float64 {
		m := map[string]float64{}
		for _, o := range outcomes {
			m[o] = series(t, insts[forwarder], fmt.Sprintf(`trellis_cluster_forwards_total{component=%q,outcome=%q}`,
				counter.Entity.ComponentID(), o))
		}
		return m
	}

	before := read()
	insts[owner].Kill()
	ctx, cancel := context.WithTimeout(context.Background(), faultLease+10*time.Second)
	defer cancel()
	want := map[string]float64{}
	for attempt := 1; ; attempt++ {
		_, err := counter.Increase.Invoke(ctx, insts[forwarder].Host().Client, id, 1)
		t.Logf("increase %d through the other instance after the kill: %v", attempt, err)
		if err == nil {
			want["unavailable"]++
			break
		}
		if !errors.Is(err, components.ErrOutcomeUnknown) || attempt == 3 {
			t.Fatalf("increase %d after the owner was killed: %v, want success or outcome unknown", attempt, err)
		}
		want["unknown"]++
	}
	after := read()
	for _, o := range outcomes {
		if d := after[o] - before[o]; d != want[o] {
			t.Errorf("forwards with outcome %q moved by %v, want %v", o, d, want[o])
		}
	}
}

// TestClusterShardMoveMetrics: a lone instance acquires every shard; once
// a second joins, the first has released as many as the second acquired,
// and each count matches the shards it serves.
func TestClusterShardMoveMetrics(t *testing.T) {
	app := &fixture.CounterApp{}
	first := trellistest.StartInstances(t, 1, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)))[0]
	trellistest.WaitSettled(t, first)
	const acquired, released = `trellis_cluster_shard_moves_total{direction="acquired"}`, `trellis_cluster_shard_moves_total{direction="released"}`
	trellistest.Eventually(t, 10*time.Second, "the first instance counts every shard acquired", func() bool {
		return series(t, first, acquired) == cluster.NumShards && series(t, first, released) == 0
	})

	second := trellistest.JoinInstance(t, first, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	trellistest.WaitSettled(t, first, second)
	var got [4]float64
	trellistest.Eventually(t, 10*time.Second, "the moves counted match the shards served", func() bool {
		got = [4]float64{series(t, first, acquired), series(t, first, released), series(t, second, acquired), series(t, second, released)}
		return got == [4]float64{cluster.NumShards, float64(second.ShardsServed()), float64(second.ShardsServed()), 0} &&
			float64(first.ShardsServed()) == cluster.NumShards-got[1]
	})
	t.Logf("moves: first acquired %v, released %v; second acquired %v, released %v; served %d and %d",
		got[0], got[1], got[2], got[3], first.ShardsServed(), second.ShardsServed())
}

// series is the value of one series, its labels included as /metrics
// writes them, on ts's /metrics; 0 when it is not there (a counter of a
// label set never counted).
func series(t *testing.T, ts *trellistest.Service, name string) float64 {
	t.Helper()
	v, _ := lookupSeries(t, ts, name)
	return v
}
