package trellis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/trellis-go/trellis/internal/fixture"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

// The linearizability check of entity commands across instances: clients
// increase and read a few hot counters through every instance at random,
// each operation is recorded with the times it was called and answered,
// and porcupine checks that some order of the operations, each taking
// effect between its call and its answer, explains every answer. An
// operation that failed may or may not have taken effect: it is recorded
// with an unknown answer that ends at infinity.

// counterOp is one operation on a counter: an increase by one, or a read.
type counterOp struct {
	key  string
	read bool
}

// counterResult is what the operation answered: the counter's value, or
// unknown (the request failed: it may have taken effect, once).
type counterResult struct {
	value   int64
	unknown bool
}

// counterModel is a register per counter that an increase adds one to.
var counterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(counterOp).key
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
		s, in, out := state.(int64), input.(counterOp), output.(counterResult)
		switch {
		case in.read && out.unknown:
			return true, s
		case in.read:
			return out.value == s, s
		case out.unknown:
			return true, s + 1
		default:
			return out.value == s+1, s + 1
		}
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, output any) string {
		in, out := input.(counterOp), output.(counterResult)
		verb := "increase"
		if in.read {
			verb = "read"
		}
		if out.unknown {
			return fmt.Sprintf("%s %s -> ?", verb, in.key)
		}
		return fmt.Sprintf("%s %s -> %d", verb, in.key, out.value)
	},
}

// history records operations from many goroutines.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// runCounterClients runs clients goroutines for d, each sending random
// increases and reads of keys to random instances, and returns the
// history and how many operations failed.
func runCounterClients(t *testing.T, instances []*trellistest.Service, keys []string, clients int, d time.Duration) (*history, int) {
	t.Helper()
	deadline := time.Now().Add(d)
	return runCounterLoad(t, keys, clients, func() bool { return time.Now().Before(deadline) },
		func(rng *rand.Rand) (*trellistest.Service, func()) {
			return instances[rng.IntN(len(instances))], func() {}
		})
}

// runCounterLoad runs clients goroutines while more says so, each sending
// random increases and reads of keys to the instance pick chooses (and
// calling the done it returns once answered), and returns the history
// and how many operations failed.
func runCounterLoad(t *testing.T, keys []string, clients int, more func() bool,
	pick func(rng *rand.Rand) (ts *trellistest.Service, done func())) (*history, int) {
	t.Helper()
	h := &history{start: time.Now()}
	var failed sync.Map
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for more() {
				ts, done := pick(rng)
				op := counterOp{key: keys[rng.IntN(len(keys))], read: rng.IntN(3) == 0}
				call := h.now()
				res, err := counterCall(ts, op)
				ret := h.now()
				done()
				if err != nil {
					failed.Store(fmt.Sprintf("%d-%d", c, call), err)
					res, ret = counterResult{unknown: true}, math.MaxInt64
				}
				h.add(porcupine.Operation{ClientId: c, Input: op, Call: call, Output: res, Return: ret})
			}
		})
	}
	wg.Wait()
	n := 0
	failed.Range(func(_, v any) bool {
		if n < 5 {
			t.Logf("failed operation: %v", v)
		}
		n++
		return true
	})
	return h, n
}

// counterCall sends op to ts.
func counterCall(ts *trellistest.Service, op counterOp) (counterResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	method, path, body := http.MethodPost, "/counters/"+op.key+"/increase", any(map[string]int{"by": 1})
	if op.read {
		method, path, body = http.MethodGet, "/counters/"+op.key, nil
	}
	resp, err := ts.Call(ctx, method, path, body)
	if err != nil {
		return counterResult{}, err
	}
	switch {
	case op.read && resp.Status == http.StatusNotFound:
		return counterResult{value: 0}, nil // never increased yet
	case resp.Status != http.StatusOK:
		return counterResult{}, fmt.Errorf("%s %s: status %d: %s", method, path, resp.Status, resp.Body)
	}
	var c contract.Counter
	if err := json.Unmarshal(resp.Body, &c); err != nil {
		return counterResult{}, err
	}
	return counterResult{value: c.Value}, nil
}

// checkLinearizable fails the test unless porcupine finds the history
// linearizable within a minute.
func checkLinearizable(t *testing.T, h *history) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(counterModel, h.ops, time.Minute)
	switch res {
	case porcupine.Ok:
		t.Logf("linearizable: %d operations", len(h.ops))
	case porcupine.Illegal:
		t.Errorf("not linearizable: %d operations; partial linearizations: %v", len(h.ops), describe(info))
	default:
		t.Errorf("linearizability unknown: the check of %d operations timed out", len(h.ops))
	}
}

func describe(info porcupine.LinearizationInfo) string {
	var b []byte
	for i, part := range info.PartialLinearizationsOperations() {
		if i == 3 {
			break
		}
		b = fmt.Appendf(b, "\n\tpartition %d: %d operations linearize", i, len(part))
	}
	return string(b)
}

// TestCounterLinearizableAcrossInstances: three instances on one Redis,
// with one key prefix, and clients sending increases and reads of three
// hot counters to all of them at random: every answer is explained by one
// order of the operations.
func TestCounterLinearizableAcrossInstances(t *testing.T) {
	url := trellistest.RedisURL(t)
	prefix := fmt.Sprintf("lin-%d", time.Now().UnixNano())
	var instances []*trellistest.Service
	for range 3 {
		// Instances that act alone on one store conflict on the hot
		// counters: let a command survive many conflicts in a row.
		instances = append(instances, fixture.StartCounter(t, &fixture.CounterApp{MaxConflicts: 1000},
			trellistest.WithRedisURL(url), trellistest.WithStorePrefix(prefix), trellistest.WithLogger(slog.New(slog.DiscardHandler))))
	}
	// A command that conflicts again and again pauses on its service's
	// clock before it retries.
	trellistest.KeepClocksMoving(t, instances[0].Clock, instances[1].Clock, instances[2].Clock)
	keys := []string{"hot-a", "hot-b", "hot-c"}
	h, failed := runCounterClients(t, instances, keys, 8, 2*time.Second)
	if failed > 0 {
		t.Errorf("%d operations failed without faults", failed)
	}
	checkLinearizable(t, h)
}

// TestCounterModel: the model accepts what a counter can answer and
// refuses a stale read and a lost increase, so that the check above can
// fail.
func TestCounterModel(t *testing.T) {
	inc := func(c int, call, ret int64, v int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: counterOp{key: "k"}, Call: call, Output: counterResult{value: v}, Return: ret}
	}
	read := func(c int, call, ret int64, v int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: counterOp{key: "k", read: true}, Call: call, Output: counterResult{value: v}, Return: ret}
	}
	failed := porcupine.Operation{ClientId: 2, Input: counterOp{key: "k"}, Call: 0, Output: counterResult{unknown: true}, Return: math.MaxInt64}
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want bool // linearizable
	}{
		{name: "increases then a read", ops: []porcupine.Operation{inc(0, 0, 1, 1), inc(1, 2, 3, 2), read(0, 4, 5, 2)}, want: true},
		{name: "concurrent increases in either order", ops: []porcupine.Operation{inc(0, 0, 5, 2), inc(1, 1, 4, 1)}, want: true},
		{name: "a failed increase that took effect", ops: []porcupine.Operation{failed, read(0, 1, 2, 1)}, want: true},
		{name: "a failed increase that did not", ops: []porcupine.Operation{failed, read(0, 1, 2, 0)}, want: true},
		{name: "a stale read", ops: []porcupine.Operation{inc(0, 0, 1, 1), read(1, 2, 3, 0)}, want: false},
		{name: "a lost increase", ops: []porcupine.Operation{inc(0, 0, 1, 1), inc(1, 2, 3, 1)}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(counterModel, tt.ops); got != tt.want {
				t.Errorf("linearizable %v, want %v", got, tt.want)
			}
		})
	}
}
