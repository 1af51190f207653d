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

// gatesApp starts the wallets and the gated workflow in a service, and
// keeps the workflow's runner.
type gatesApp struct{ wf *workflows.Running[Gated] }

func (a *gatesApp) setup(h *trellis.Host, _ chi.Router) error {
	if _, err := Wallets.Start(h.Entities()); err != nil {
		return err
	}
	wf, err := Gates.Start(h.Workflows())
	a.wf = wf
	return err
}

// startGates starts an instance of a cluster on Redis (the first when
// like is nil, else one more of like's).
func startGates(t *testing.T, like *trellistest.Service) (*trellistest.Service, *gatesApp) {
	t.Helper()
	app := &gatesApp{}
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
