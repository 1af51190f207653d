package workflows_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// fenceLease is the cluster lease of the stale-owner tests: short, so
// that the shards of an owner cut off from Redis are taken soon.
const fenceLease = 2 * time.Second

// Handoff credits wallet "w-<id>" by 1 at step "hold", whose run then
// waits at the gate of the instance it runs on, and by 10 at step
// "after", which ends it. HeldBy names the instance whose run of "hold"
// was committed.
type Handoff struct {
	HeldBy string `json:"heldBy"`
}

// handoffGate is a Handoff instance's: events gets "<step> on
// <instance>" once a run made its credit, and "hold on <instance>:
// cancelled" when a run of hold ended by its context's cancellation; a
// run of hold goes on once open[instance] is closed. overlaps counts the
// runs of hold that started while another was under way, on any instance.
type handoffGate struct {
	events   chan string
	open     map[string]chan struct{}
	inFlight atomic.Int32
	overlaps atomic.Int32
}

var (
	Handoffs = workflows.Define("handoff", func(string) Handoff { return Handoff{} })

	BeginHandoff = workflows.Command(Handoffs, "begin",
		func(ctx *workflows.Ctx[Handoff, components.Done], s Handoff, _ components.Done) workflows.Effect[Handoff, components.Done] {
			return ctx.TransitionTo("hold", nil).ThenReply(components.Done{})
		})

	handoffGates  sync.Map // workflow id → *handoffGate
	instanceNames sync.Map // an instance's *components.Client → the test's name for it
)

// newHandoffGate makes the gate of instance id, for instances owner and
// taker.
func newHandoffGate(id string) *handoffGate {
	g := &handoffGate{events: make(chan string, 16),
		open: map[string]chan struct{}{"owner": make(chan struct{}), "taker": make(chan struct{})}}
	handoffGates.Store(id, g)
	return g
}

// on is the name of the instance a step runs on.
func on(ctx *workflows.StepCtx[Handoff]) string {
	if name, ok := instanceNames.Load(ctx.Client()); ok {
		return name.(string)
	}
	return "an instance the test did not name"
}

func init() {
	workflows.Step(Handoffs, "hold",
		func(ctx *workflows.StepCtx[Handoff], s Handoff, _ any) workflows.StepEffect[Handoff] {
			v, _ := handoffGates.Load(ctx.WorkflowID())
			g, here := v.(*handoffGate), on(ctx)
			if g.inFlight.Add(1) > 1 {
				g.overlaps.Add(1)
			}
			if _, err := Credit.Invoke(ctx.Context(), ctx.Client(), "w-"+ctx.WorkflowID(), 1); err != nil {
				g.inFlight.Add(-1)
				return ctx.Fail("credit: %v", err)
			}
			g.events <- "hold on " + here
			select {
			case <-g.open[here]:
			case <-ctx.Context().Done():
				g.inFlight.Add(-1)
				g.events <- "hold on " + here + ": cancelled"
				return ctx.Fail("cancelled")
			}
			g.inFlight.Add(-1)
			s.HeldBy = here
			return ctx.UpdateState(s).TransitionTo("after", nil)
		})
	workflows.Step(Handoffs, "after",
		func(ctx *workflows.StepCtx[Handoff], s Handoff, _ any) workflows.StepEffect[Handoff] {
			v, _ := handoffGates.Load(ctx.WorkflowID())
			if _, err := Credit.Invoke(ctx.Context(), ctx.Client(), "w-"+ctx.WorkflowID(), 10); err != nil {
				return ctx.Fail("credit: %v", err)
			}
			v.(*handoffGate).events <- "after on " + on(ctx)
			return ctx.UpdateState(s).End()
		})
}

// staleOwner is a cluster of two instances on Redis: owner reaches Redis
// only through proxy, so that the test can cut it off from Redis (not
// from taker), and taker directly.
type staleOwner struct {
	owner, taker *trellistest.Service
	wf           *workflows.Running[Handoff] // taker's runner
	proxy        *peertest.Proxy
}

// startStaleOwner starts the cluster and waits until it has settled.
func startStaleOwner(t *testing.T) *staleOwner {
	t.Helper()
	lease := trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = fenceLease })
	redisURL := trellistest.RedisURL(t)
	takerApp := &walletsApp[Handoff]{t: Handoffs}
	taker := trellistest.StartInstances(t, 1, takerApp.setup, lease, trellistest.WithRedisURL(redisURL))[0]
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := peertest.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	// A reply the proxy holds back past go-redis's default read timeout
	// (3 s) still reaches the owner, bounded by its calls' contexts: it
	// sees the store's answer to a stalled write rather than a timeout.
	q := u.Query()
	q.Set("read_timeout", "20s")
	u.RawQuery = q.Encode()
	owner := trellistest.JoinInstance(t, taker, (&walletsApp[Handoff]{t: Handoffs}).setup, lease, trellistest.WithRedisURL(u.String()))
	t.Cleanup(func() { proxy.Release(); proxy.Refuse(false) }) // runs before the instances stop
	instanceNames.Store(owner.Client, "owner")
	instanceNames.Store(taker.Client, "taker")
	t.Cleanup(func() {
		instanceNames.Delete(owner.Client)
		instanceNames.Delete(taker.Client)
	})
	trellistest.WaitSettled(t, owner, taker)
	return &staleOwner{owner: owner, taker: taker, wf: takerApp.wf, proxy: proxy}
}

// idOnOwner is an id with prefix of a Handoff instance whose shard owner
// serves.
func (c *staleOwner) idOnOwner(t *testing.T, prefix string) string {
	t.Helper()
	for i := range 1000 {
		if id := prefix + "-" + string(rune('a'+i%26)) + string(rune('a'+i/26)); c.owner.Serves("handoff", id) {
			return id
		}
	}
	t.Fatal("owner serves none of the ids tried")
	return ""
}

// nextEvent checks that g's next event is want.
func nextEvent(t *testing.T, g *handoffGate, want string) {
	t.Helper()
	if got := trellistest.Recv(t, g.events, 30*time.Second); got != want {
		t.Fatalf("event %q, want %q", got, want)
	}
}

// TestRedisStaleOwner: the owner of a workflow's shard is cut off from
// Redis (not from the other instance) during the workflow's step, which
// has made its entity call; once its lease lapses the other instance
// takes the shard over under a new fence and runs the step again. The
// step's run on the cut-off owner either returned before the cut, its
// commit stalled in the network until the new owner runs the step (and
// then reaching Redis under the old fence, before the new owner writes
// the record), or still runs when its owner's lease lapses (cancelled
// then, before the new owner runs the step). Either way nothing the old
// owner does is written: the workflow ends once, by the new owner's runs,
// its entity commands applied once each, no step run overlapping
// another, and once the old owner reaches Redis again and joins the
// cluster anew it runs none of the workflow's steps.
func TestRedisStaleOwner(t *testing.T) {
	cases := []struct {
		name string
		// stalled: the step's run returns, and its commit is held in the
		// network; else the run still waits at its gate.
		stalled bool
	}{
		{name: "its commit stalled", stalled: true},
		{name: "its step running", stalled: false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := startStaleOwner(t)
			id := c.idOnOwner(t, "stale-"+string(rune('0'+i)))
			g := newHandoffGate(id)
			if _, err := BeginHandoff.Invoke(ctx, c.owner.Client, id, components.Done{}); err != nil {
				t.Fatal(err)
			}
			nextEvent(t, g, "hold on owner")

			cut := make(chan struct{})
			cutOff := func() { c.proxy.Hold(); c.proxy.Refuse(true); close(cut) }
			var stalled *peertest.Stalled
			if tc.stalled {
				// The commit's write names the workflow: the first
				// bytes to Redis that do, since the step's credit went.
				stalled = c.proxy.HoldWhenSent(id, cutOff)
				close(g.open["owner"])
			} else {
				cutOff()
			}
			trellistest.Recv(t, cut, 10*time.Second)
			trellistest.Eventually(t, 10*fenceLease, "the taker serves the workflow's shard", func() bool {
				return c.taker.Serves("handoff", id)
			})
			if !tc.stalled {
				nextEvent(t, g, "hold on owner: cancelled")
				if !strings.Contains(c.owner.Logs(), "workflows: steps stopped") {
					t.Error("the owner did not log that it stopped the step")
				}
			}
			nextEvent(t, g, "hold on taker")
			if stalled != nil {
				// The owner's commit reaches Redis under its old fence,
				// while the record is as the owner last wrote it: only
				// the fence refuses it.
				stalled.Release()
				trellistest.Recv(t, stalled.Answered(), 10*time.Second)
			}
			close(g.open["taker"])
			nextEvent(t, g, "after on taker")
			trellistest.Eventually(t, 20*time.Second, "the workflow ended", func() bool {
				in, err := c.wf.Get(ctx, id)
				return err == nil && in.Status == workflows.StatusEnded
			})
			wantStored(t, c.wf, id)
			if w := wallet(t, c.taker.Client, "w-"+id); w.Applied != 2 || w.Balance != 11 {
				t.Errorf("wallet: %+v, want each step's credit applied once", w)
			}
			if n := g.overlaps.Load(); n != 0 {
				t.Errorf("%d runs of the step started while another ran", n)
			}

			c.proxy.Release()
			c.proxy.Refuse(false)
			trellistest.WaitSettled(t, c.owner, c.taker)
			select {
			case e := <-g.events:
				t.Errorf("after the workflow ended: %s", e)
			default:
			}
		})
	}
}

// wantStored checks workflow id's record as stored (read from the store,
// not an instance's memory): ended by the taker's runs, one transition
// per move.
func wantStored(t *testing.T, wf *workflows.Running[Handoff], id string) {
	t.Helper()
	recs, _, err := wf.List(context.Background(), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.ID != id {
			continue
		}
		var s Handoff
		if err := json.Unmarshal(rec.State, &s); err != nil {
			t.Fatal(err)
		}
		if rec.Status != workflows.StatusEnded || rec.Transition != 3 || s.HeldBy != "taker" {
			t.Errorf("stored: %s at transition %d, held by %q; want ended at 3, held by the taker; history %+v",
				rec.Status, rec.Transition, s.HeldBy, rec.History)
		}
		return
	}
	t.Errorf("workflow %s is not stored", id)
}
