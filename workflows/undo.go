package workflows

import (
	"encoding/json"
	"fmt"
)

// Undo is what a workflow has done so far, as the steps that undo it,
// kept in its state: the common case of a compensation, undoing what the
// steps before did in reverse order, in a few lines. Each step that does
// something pushes the step that undoes it; the compensation step (the
// steps' failover) pops the last and goes to it, and each undo step goes
// back to the compensation step when it is done:
//
//	s.Undo.Push("refund", amount)
//	return ctx.UpdateState(s).TransitionTo("deposit", amount)
//	...
//	// the "compensate" step
//	if next, ok := s.Undo.Pop(); ok {
//		return ctx.UpdateState(s).TransitionTo(next.Step, next.Input)
//	}
//	return ctx.UpdateState(s).End()
type Undo []Target

// Push adds the step that undoes what was just done, with its input. An
// input that does not encode as JSON panics (a step's panic fails its
// run).
func (u *Undo) Push(step string, input any) {
	b, err := json.Marshal(input)
	if err != nil {
		panic(fmt.Sprintf("workflows.Undo.Push %q: encode the input: %v", step, err))
	}
	*u = append(*u, Target{Step: step, Input: b})
}

// Pop removes the step pushed last and returns it; ok is false when
// nothing is left to undo.
func (u *Undo) Pop() (next Target, ok bool) {
	if len(*u) == 0 {
		return Target{}, false
	}
	next = (*u)[len(*u)-1]
	*u = (*u)[:len(*u)-1]
	return next, true
}
