package lincheck

import (
	"fmt"
	"math"
	"slices"

	"github.com/anishathalye/porcupine"
)

// CheckCounters decides exactly whether a history of CounterOps (increases
// by one, and reads) is linearizable, counter by counter, in O(n log n):
// where porcupine searches the orders of the operations, which histories
// of tens of thousands of operations per counter are beyond, it uses what
// a counter that only grows by one allows. The increase answered v is the
// one that took the counter from v-1 to v: each value 1..M (the highest
// answered) is reached by exactly one increase, an answered one or one of
// unknown outcome, at a point inside that increase's interval; a read
// answered v falls between the points of v and v+1. Placing each point
// as early as its bounds allow, the earliest unknown increase filling
// each value nobody answered, finds a linearization when there is one.
// It returns nil, or why the history of the first counter that is not
// linearizable is not. Operations must be CounterOps with CounterResults.
func CheckCounters(ops []porcupine.Operation) error {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range ops {
		k := op.Input.(CounterOp).Key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	for _, k := range keys {
		if err := checkCounter(byKey[k]); err != nil {
			return fmt.Errorf("counter %s: %w", k, err)
		}
	}
	return nil
}

// reach is what bounds the point at which a counter reaches a value.
type reach struct {
	lo, hi int64 // the point is in [lo, hi]
	known  bool  // an answered increase reaches it
}

// checkCounter is CheckCounters for one counter's operations.
func checkCounter(ops []porcupine.Operation) error {
	ops = spread(ops)
	var unknownCalls []int64 // of the increases of unknown outcome
	top, answered := int64(0), 0
	for _, op := range ops {
		in, out := op.Input.(CounterOp), op.Output.(CounterResult)
		switch {
		case out.Unknown && !in.Read:
			unknownCalls = append(unknownCalls, op.Call)
		case out.Unknown:
		default:
			if out.Value < 0 || (!in.Read && out.Value == 0) {
				return fmt.Errorf("%s answered %d: a counter increased by one never does", verb(in), out.Value)
			}
			top = max(top, out.Value)
			if !in.Read {
				answered++
			}
		}
	}
	if top > int64(answered+len(unknownCalls)) {
		return fmt.Errorf("the value %d was answered after %d increases at most", top, answered+len(unknownCalls))
	}
	// reaches[v] bounds the point of the increase that reaches v (1..top).
	reaches := make([]reach, top+2)
	for v := range reaches {
		reaches[v] = reach{lo: math.MinInt64, hi: math.MaxInt64}
	}
	for _, op := range ops {
		in, out := op.Input.(CounterOp), op.Output.(CounterResult)
		if out.Unknown {
			continue
		}
		v := out.Value
		if in.Read {
			// Between the points of v and v+1: v reached by the read's
			// answer, v+1 not before its call.
			reaches[v].hi = min(reaches[v].hi, op.Return)
			reaches[v+1].lo = max(reaches[v+1].lo, op.Call+1)
			continue
		}
		if reaches[v].known {
			return fmt.Errorf("two increases answered %d", v)
		}
		reaches[v].known = true
		reaches[v].lo = max(reaches[v].lo, op.Call)
		reaches[v].hi = min(reaches[v].hi, op.Return)
	}
	slices.Sort(unknownCalls)
	prev := int64(math.MinInt64)
	for v := int64(1); v <= top; v++ {
		r := reaches[v]
		at := max(r.lo, prev+1)
		if !r.known {
			if len(unknownCalls) == 0 {
				return fmt.Errorf("no increase can have taken it to %d", v)
			}
			at = max(at, unknownCalls[0])
			unknownCalls = unknownCalls[1:]
		}
		if at > r.hi {
			return fmt.Errorf("the increase to %d cannot take effect within the answers that bound it (at %d at the earliest, by %d at the latest)", v, at, r.hi)
		}
		prev = at
	}
	return nil
}

// spread maps the operations' times onto a line with room between any
// two of them for a point per operation, keeping their order as porcupine
// reads it: a call and a return at the same time overlap (the call comes
// first), so a call at t maps to the start of t's room and a return at t
// to its end.
func spread(ops []porcupine.Operation) []porcupine.Operation {
	times := make([]int64, 0, 2*len(ops))
	for _, op := range ops {
		times = append(times, op.Call)
		if op.Return != math.MaxInt64 {
			times = append(times, op.Return)
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	room := int64(len(ops) + 2)
	at := func(t int64) int64 {
		i, _ := slices.BinarySearch(times, t)
		return int64(i) * room
	}
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		op.Call = at(op.Call)
		if op.Return != math.MaxInt64 {
			op.Return = at(op.Return) + room - 1
		}
		out[i] = op
	}
	return out
}

func verb(in CounterOp) string {
	if in.Read {
		return "a read"
	}
	return "an increase"
}
