package workflows_test

import (
	"slices"
	"testing"

	"github.com/trellis-go/trellis/workflows"
)

// TestUndo: what was pushed pops in reverse order, with its input as
// JSON, and an empty Undo pops nothing.
func TestUndo(t *testing.T) {
	var u workflows.Undo
	u.Push("refund", 30)
	u.Push("release", "sku-1")
	var got []string
	for next, ok := u.Pop(); ok; next, ok = u.Pop() {
		got = append(got, next.Step+"("+string(next.Input)+")")
	}
	if want := []string{`release("sku-1")`, "refund(30)"}; !slices.Equal(got, want) {
		t.Errorf("popped %v, want %v", got, want)
	}
	if len(u) != 0 {
		t.Errorf("left %v", u)
	}
}

// TestStepKeys: a step run's key is the same for every attempt under one
// transition and differs for another step, transition, run or instance.
func TestStepKeys(t *testing.T) {
	base := workflows.StepKey("transfer", "t-1", "r1", "withdraw", 3)
	for _, other := range []string{
		workflows.StepKey("transfer", "t-1", "r1", "deposit", 3),
		workflows.StepKey("transfer", "t-1", "r1", "withdraw", 4),
		workflows.StepKey("transfer", "t-1", "r2", "withdraw", 3),
		workflows.StepKey("transfer", "t-2", "r1", "withdraw", 3),
	} {
		if other == base {
			t.Errorf("key %q names two step runs", base)
		}
	}
	if got := Transfers.Steps(); !slices.Equal(got, []string{"deposit", "refund", "withdraw"}) {
		t.Errorf("steps %v", got)
	}
}
