package views_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
	"github.com/trellis-go/trellis/workflows"
)

// approval is the state of the tests' workflow: a request is submitted,
// then reviewed: one of 100 or less ends, a larger one pauses.
type approval struct {
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
}

var approvals = workflows.Define("view-test-approval", func(string) approval { return approval{} })

var submit = workflows.Command(approvals, "submit",
	func(ctx *workflows.Ctx[approval, components.Done], _ approval, req approval) workflows.Effect[approval, components.Done] {
		return ctx.UpdateState(req).TransitionTo("review", nil).ThenReply(components.Done{})
	})

func init() {
	workflows.Step(approvals, "review",
		func(ctx *workflows.StepCtx[approval], s approval, _ any) workflows.StepEffect[approval] {
			if s.Amount > 100 {
				return ctx.Pause()
			}
			return ctx.End()
		})
}

// approvalRow is the row of the view over the workflow.
type approvalRow struct {
	Customer string `json:"customer"`
	Status   string `json:"status"`
	Step     string `json:"step"`
	Amount   int    `json:"amount"`
}

var (
	approvalView = views.DefineWorkflow("test-approvals", approvals,
		func(c views.Change[workflows.Instance[approval]]) views.Update[approvalRow] {
			if c.Deleted {
				return views.Delete[approvalRow]()
			}
			in := c.State
			return views.Upsert(approvalRow{Customer: in.State.Customer, Status: string(in.Status), Step: in.Step, Amount: in.State.Amount})
		})
	approvalsByStatus = approvalView.Query("by-status", views.Eq("status"), views.SortBy("amount", views.Asc))
)

func approvalsApp(h *trellis.Host, _ chi.Router) error {
	if _, err := approvals.Start(h.Workflows()); err != nil {
		return err
	}
	return approvalView.Start(h.Views())
}

// TestViewOfWorkflow: a view over a workflow type's instances follows
// each instance's transitions (running, then ended or paused) and its
// state, on the embedded store and on Redis (the cluster mode); a query
// by status pages through them in amount order.
func TestViewOfWorkflow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *trellistest.Service
	}{
		{"memory", func(t *testing.T) *trellistest.Service { return trellistest.Start(t, approvalsApp) }},
		{"redis", func(t *testing.T) *trellistest.Service {
			ts := trellistest.StartInstances(t, 1, approvalsApp)[0]
			trellistest.WaitSettled(t, ts)
			return ts
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.start(t)
			ctx := context.Background()
			amounts := []int{50, 500, 20, 200, 100, 7}
			for i, amount := range amounts {
				if _, err := submit.Invoke(ctx, ts.Host().Client, fmt.Sprintf("a-%d", i), approval{Customer: "c", Amount: amount}); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string][]int{string(workflows.StatusEnded): {7, 20, 50, 100}, string(workflows.StatusPaused): {200, 500}}
			deadline := time.Now().Add(waitLong)
			for status, amounts := range want {
				for {
					var got []int
					req := views.Request{Params: map[string]string{"status": status}, Limit: 3}
					for {
						p, err := approvalsByStatus.Page(ctx, ts.Host().Views(), req)
						if err != nil {
							t.Fatal(err)
						}
						for _, row := range p.Rows {
							got = append(got, row.Amount)
						}
						if req.Token = p.Next; p.Next == "" {
							break
						}
					}
					if slices.Equal(got, amounts) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("status %s: the view has amounts %v, want %v", status, got, amounts)
					}
					<-time.After(20 * time.Millisecond) // a bounded poll: the step's outcome comes after the command

				}
			}
		})
	}
}
