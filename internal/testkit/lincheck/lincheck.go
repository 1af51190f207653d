// Package lincheck checks histories of counter operations for
// linearizability (exactly, with CheckCounters, and with porcupine): tests that increase and read a few
// counters through several instances record each operation with the
// times it was called and answered, and the check finds whether some
// order of them, each taking effect between its call and its answer,
// explains every answer. An operation that failed may or may not have
// taken effect: it is recorded with CounterResult{Unknown: true}, ending
// at infinity.
package lincheck

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// CounterOp is one operation on a counter: an increase by one, or a read.
type CounterOp struct {
	Key  string
	Read bool
}

// CounterResult is what the operation answered: the counter's value, or
// unknown (the request failed: it may have taken effect, once).
type CounterResult struct {
	Value   int64
	Unknown bool
}

// CounterModel is a register per counter that an increase adds one to.
var CounterModel = porcupine.Model{
	Partition: func(History []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range History {
			k := op.Input.(CounterOp).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(int64), input.(CounterOp), output.(CounterResult)
		switch {
		case in.Read && out.Unknown:
			return true, s
		case in.Read:
			return out.Value == s, s
		case out.Unknown:
			return true, s + 1
		default:
			return out.Value == s+1, s + 1
		}
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, output any) string {
		in, out := input.(CounterOp), output.(CounterResult)
		verb := "increase"
		if in.Read {
			verb = "read"
		}
		if out.Unknown {
			return fmt.Sprintf("%s %s -> ?", verb, in.Key)
		}
		return fmt.Sprintf("%s %s -> %d", verb, in.Key, out.Value)
	},
}

// History records operations from many goroutines.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{start: time.Now()} }

// Len is the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Record adds an operation of client c called at call: its result, or,
// when err is not nil, an unknown result that ends at infinity.
func (h *History) Record(c int, op CounterOp, call int64, res CounterResult, err error) {
	ret := h.Now()
	if err != nil {
		res, ret = CounterResult{Unknown: true}, math.MaxInt64
	}
	h.Add(porcupine.Operation{ClientId: c, Input: op, Call: call, Output: res, Return: ret})
}

// Now is the time since the history began, as porcupine counts it.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records op.
func (h *History) Add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// CheckLinearizable fails the test unless the History is linearizable,
// by the exact check of CheckCounters (which porcupine's search would
// take too long for on a long history).
func CheckLinearizable(t *testing.T, h *History) {
	t.Helper()
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	if err := CheckCounters(ops); err != nil {
		t.Errorf("not linearizable: %d operations: %v", len(ops), err)
		return
	}
	t.Logf("linearizable: %d operations", len(ops))
}

// Check is porcupine's verdict on the History within a minute: Ok,
// Illegal, or Unknown when the check timed out. For a test that expects
// a fault may break linearizability and reports it rather than fail.
func (h *History) Check() porcupine.CheckResult {
	res, _ := h.check()
	return res
}

func (h *History) check() (porcupine.CheckResult, porcupine.LinearizationInfo) {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	return porcupine.CheckOperationsVerbose(CounterModel, ops, time.Minute)
}

// Tally is what a History holds of one counter.
type Tally struct {
	Increases int   // increases answered with a value
	Unknown   int   // increases of unknown outcome
	Highest   int64 // the highest value answered, by an increase or a read
}

// Tallies counts, for each counter, the answered and unknown increases
// and the highest value answered. A counter read at the end at less than
// its Increases lost at least the difference of acknowledged increases
// (an unknown one that took effect only hides a loss), and one read at
// less than its Highest went back on a value it had answered.
func (h *History) Tallies() map[string]Tally {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Tally{}
	for _, op := range h.ops {
		in, res := op.Input.(CounterOp), op.Output.(CounterResult)
		t := out[in.Key]
		switch {
		case res.Unknown && !in.Read:
			t.Unknown++
		case res.Unknown:
		case !in.Read:
			t.Increases++
			t.Highest = max(t.Highest, res.Value)
		default:
			t.Highest = max(t.Highest, res.Value)
		}
		out[in.Key] = t
	}
	return out
}
