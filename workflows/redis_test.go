package workflows_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// killLease is the cluster lease of the kill tests: short, so that a
// killed instance's shards are taken soon.
const killLease = 2 * time.Second

// walletsApp starts the wallets and workflow type t in a service, and
// keeps the workflow's runner.
type walletsApp[S any] struct {
	t  *workflows.Type[S]
	wf *workflows.Running[S]
}

func (a *walletsApp[S]) setup(h *trellis.Host, _ chi.Router) error {
	if _, err := Wallets.Start(h.Entities()); err != nil {
		return err
	}
	wf, err := a.t.Start(h.Workflows())
	a.wf = wf
	return err
}

// startGates starts an instance of a cluster on Redis (the first when
// like is nil, else one more of like's).
func startGates(t *testing.T, like *trellistest.Service) (*trellistest.Service, *walletsApp[Gated]) {
	t.Helper()
	app := &walletsApp[Gated]{t: Gates}
	opts := []trellistest.Option{trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = killLease })}
	if like == nil {
		return trellistest.StartInstances(t, 1, app.setup, opts...)[0], app
	}
	return trellistest.JoinInstance(t, like, app.setup, opts...), app
}

// TestRedisKillAndResume: on Redis in the cluster mode (records written
// under the shard's fence, with the change in the shard's log), an
// instance killed while a step runs, after its entity call and before its
// commit; once its lease lapses the next owner of the shard resumes the
// workflow at that step, with the same key, and runs it to its end.
func TestRedisKillAndResume(t *testing.T) {
	ctx := context.Background()
	g := newGate("rk-1")
	first, _ := startGates(t, nil)
	trellistest.WaitSettled(t, first)
	if _, err := Open.Invoke(ctx, first.Client, "rk-1", components.Done{}); err != nil {
		t.Fatal(err)
	}
	key := <-g.entered
	second, app := startGates(t, first)
	first.Kill()
	trellistest.Eventually(t, killLease+20*time.Second, "the second instance serves every shard", func() bool {
		return second.ShardsServed() == 256
	})
	select {
	case again := <-g.entered:
		if again != key {
			t.Errorf("the step ran again with key %q, want %q", again, key)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the step did not run again on the new owner")
	}
	close(g.open)
	trellistest.Eventually(t, 10*time.Second, "the workflow ended", func() bool {
		in, err := app.wf.Get(ctx, "rk-1")
		return err == nil && in.Status == workflows.StatusEnded && in.State.Ran == 1
	})
	wantAppliedOnce(t, second.Client, "w-rk-1")
}

// TestRedisShardMove: shards move while steps run: a second instance
// joins the only one and takes half the shards, or one of two instances
// leaves (a graceful shutdown) and hands its shards to the other. The
// instance giving a shard up stops the steps of its workflows before it
// releases it, and the one taking it resumes those workflows at their
// current step: no step runs on both instances at once, and once the
// steps may finish every workflow ends with its step's outcome committed
// once and its credit applied once.
func TestRedisShardMove(t *testing.T) {
	for _, leaving := range []bool{false, true} {
		name := "joining"
		if leaving {
			name = "leaving"
		}
		t.Run(name, func(t *testing.T) { shardMove(t, "sm-"+name[:1]+"-", leaving) })
	}
}

// shardMove is a case of TestRedisShardMove, on workflows named prefix
// and a letter.
func shardMove(t *testing.T, prefix string, leaving bool) {
	ctx := context.Background()
	first, app := startGates(t, nil)
	trellistest.WaitSettled(t, first)
	var second *trellistest.Service
	if leaving {
		second, _ = startGates(t, first)
		trellistest.WaitSettled(t, first, second)
	}
	ids := make([]string, 16)
	opened := make(map[string]*gateOf, len(ids))
	for i := range ids {
		ids[i] = prefix + string(rune('a'+i))
		opened[ids[i]] = newGate(ids[i])
		if _, err := Open.Invoke(ctx, first.Client, ids[i], components.Done{}); err != nil {
			t.Fatal(err)
		}
		<-opened[ids[i]].entered
	}
	if !leaving {
		second, _ = startGates(t, first)
		trellistest.WaitSettled(t, first, second)
	}
	// The shards that move are the second instance's: those it took, or
	// those it hands back as it leaves.
	var moving []string
	for _, id := range ids {
		if second.Serves("gated", id) {
			moving = append(moving, id)
		}
	}
	taker := second
	if leaving {
		taker = first
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := second.Shutdown(sctx)
		cancel()
		if err != nil {
			t.Fatalf("the second instance leaving: %v", err)
		}
	}
	if len(moving) == 0 {
		t.Fatal("no workflow's shard moved: the test shows nothing")
	}
	for _, id := range moving {
		select {
		case <-opened[id].entered:
		case <-time.After(20 * time.Second):
			t.Fatalf("workflow %s did not run again on the instance that took its shard", id)
		}
	}
	for _, id := range ids {
		close(opened[id].open)
	}
	for _, id := range ids {
		trellistest.Eventually(t, 20*time.Second, "workflow "+id+" ended", func() bool {
			in, err := app.wf.Get(ctx, id)
			return err == nil && in.Status == workflows.StatusEnded
		})
		if in, _ := app.wf.Get(ctx, id); in.State.Ran != 1 || in.Transition != 2 {
			t.Errorf("workflow %s: ran %d, transition %d; want its step committed once", id, in.State.Ran, in.Transition)
		}
		if n := opened[id].overlaps.Load(); n != 0 {
			t.Errorf("workflow %s: %d runs of its step started while another ran", id, n)
		}
		wantAppliedOnce(t, taker.Client, "w-"+id)
	}
	t.Logf("%d of %d workflows moved", len(moving), len(ids))
}
