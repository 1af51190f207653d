package workflows_test

import (
	"context"
	"testing"

	"github.com/trellis-go/trellis/workflows"
)

// TestRepliesAreTheCallers: what Get and Inspect return is the caller's
// to change: changing it in place changes nothing the workflow holds.
func TestRepliesAreTheCallers(t *testing.T) {
	e := start(t, Transfers, nil, nil)
	ctx := context.Background()
	fund(t, e.client, "erin", 10)
	if _, err := Begin.Invoke(ctx, e.client, "t-own", Transfer{From: "erin", To: "finn", Amount: 4}); err != nil {
		t.Fatal(err)
	}
	in := waitFor(t, e, "t-own", "ended", status[Transfer](workflows.StatusEnded))
	want := in.History[0].Outcome
	in.History[0].Outcome = "scribbled"
	rec, err := e.wf.Inspect(ctx, "t-own")
	if err != nil {
		t.Fatal(err)
	}
	rec.History[0].Outcome = "scribbled"
	rec.State[0] = 'X'
	again, err := e.wf.Inspect(ctx, "t-own")
	if err != nil {
		t.Fatal(err)
	}
	if again.History[0].Outcome != want || again.State[0] != '{' {
		t.Fatalf("after the caller changed its copies, the workflow holds history %q and state %s; want %q and the state unchanged",
			again.History[0].Outcome, again.State, want)
	}
}
