package consumers_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// review is the tests' workflow: a request is submitted, then checked: a
// small one ends and is deleted, a large one pauses for a decision, which
// ends it.
type review struct {
	Amount int `json:"amount"`
}

var (
	reviews = workflows.Define("consumer-test-review", func(string) review { return review{} })

	submitReview = workflows.Command(reviews, "submit",
		func(ctx *workflows.Ctx[review, components.Done], _ review, r review) workflows.Effect[review, components.Done] {
			return ctx.UpdateState(r).TransitionTo("check", nil).ThenReply(components.Done{})
		})
	decideReview = workflows.Command(reviews, "decide",
		func(ctx *workflows.Ctx[review, components.Done], s review, _ components.Done) workflows.Effect[review, components.Done] {
			return ctx.UpdateState(s).End().ThenReply(components.Done{})
		})
)

func init() {
	workflows.Step(reviews, "check", func(ctx *workflows.StepCtx[review], s review, _ any) workflows.StepEffect[review] {
		if s.Amount > 100 {
			return ctx.Pause()
		}
		return ctx.EndAndDelete()
	})
}

// seenReviews records what the workflow's consumer got, by instance:
// "status step amount", or "deleted".
type seenReviews struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (s *seenReviews) handle(ctx *consumers.Ctx, c consumers.Change[workflows.Instance[review]]) consumers.Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	what := "deleted"
	if !c.Deleted {
		what = string(c.State.Status) + " " + c.State.Step + " " + strconv.Itoa(c.State.State.Amount)
	}
	s.seen[c.EntityID] = append(s.seen[c.EntityID], what)
	return ctx.Done()
}

func (s *seenReviews) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen[id])
}

// TestConsumerOfWorkflow: a consumer of a workflow type gets each change
// of each instance, in order, as the instance stood after it: its start
// (running at its step), its pause, its end, and its deletion; on the
// embedded store and on Redis (the cluster mode).
func TestConsumerOfWorkflow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, setup trellis.Setup) *trellistest.Service
	}{
		{"memory", func(t *testing.T, setup trellis.Setup) *trellistest.Service { return trellistest.Start(t, setup) }},
		{"redis", func(t *testing.T, setup trellis.Setup) *trellistest.Service {
			ts := trellistest.StartInstances(t, 1, setup)[0]
			trellistest.WaitSettled(t, ts)
			return ts
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &seenReviews{seen: make(map[string][]string)}
			var wf *workflows.Running[review]
			ts := tc.start(t, func(h *trellis.Host, _ chi.Router) error {
				var err error
				if wf, err = reviews.Start(h.Workflows()); err != nil {
					return err
				}
				_, err = consumers.DefineWorkflow("review-log", reviews, rec.handle).Start(h.Consumers())
				return err
			})
			ctx := context.Background()
			client := ts.Host().Client
			for id, amount := range map[string]int{"small": 50, "large": 500} {
				if _, err := submitReview.Invoke(ctx, client, id, review{Amount: amount}); err != nil {
					t.Fatal(err)
				}
			}
			trellistest.WaitWorkflow(t, wf, "large", 10*time.Second, workflows.StatusPaused)
			if _, err := decideReview.Invoke(ctx, client, "large", components.Done{}); err != nil {
				t.Fatal(err)
			}
			trellistest.WaitWorkflow(t, wf, "large", 10*time.Second, workflows.StatusEnded)
			trellistest.WaitWorkflow(t, wf, "small", 10*time.Second, workflows.StatusNotStarted) // deleted
			want := map[string][]string{
				"small": {"running check 50", "deleted"},
				"large": {"running check 500", "paused  500", "ended  500"},
			}
			trellistest.Eventually(t, 10*time.Second, "the consumer sees every change", func() bool {
				return slices.Equal(rec.of("small"), want["small"]) && slices.Equal(rec.of("large"), want["large"])
			})
		})
	}
}
