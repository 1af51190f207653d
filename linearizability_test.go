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

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// The linearizability check of entity commands across instances: clients
// increase and read a few hot counters through every instance at random,
// each operation is recorded with the times it was called and answered,
// and porcupine checks that some order of the operations, each taking
// effect between its call and its answer, explains every answer. An
// operation that failed may or may not have taken effect: it is recorded
// with an unknown answer that ends at infinity.

// runCounterClients runs clients goroutines for d, each sending random
// increases and reads of keys to random instances, and returns the
// history and the operations that failed.
func runCounterClients(t *testing.T, instances []*trellistest.Service, keys []string, clients int, d time.Duration) (*lincheck.History, []error) {
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
// and the errors of the operations that failed (the first five are
// logged).
func runCounterLoad(t *testing.T, keys []string, clients int, more func() bool,
	pick func(rng *rand.Rand) (ts *trellistest.Service, done func())) (*lincheck.History, []error) {
	t.Helper()
	h := lincheck.NewHistory()
	var (
		mu     sync.Mutex
		failed []error
		wg     sync.WaitGroup
	)
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for more() {
				ts, done := pick(rng)
				op := lincheck.CounterOp{Key: keys[rng.IntN(len(keys))], Read: rng.IntN(3) == 0}
				call := h.Now()
				res, err := counterCall(ts, op)
				done()
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
				h.Record(c, op, call, res, err)
			}
		})
	}
	wg.Wait()
	for _, err := range failed[:min(len(failed), 5)] {
		t.Logf("failed operation: %v", err)
	}
	return h, failed
}

// statusError is an answer other than the value: its status and body.
type statusError struct {
	status int
	what   string
}

func (e *statusError) Error() string { return e.what }

// counterCall sends op to ts.
func counterCall(ts *trellistest.Service, op lincheck.CounterOp) (lincheck.CounterResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	method, path, body := http.MethodPost, "/counters/"+op.Key+"/increase", any(map[string]int{"by": 1})
	if op.Read {
		method, path, body = http.MethodGet, "/counters/"+op.Key, nil
	}
	resp, err := ts.Call(ctx, method, path, body)
	if err != nil {
		return lincheck.CounterResult{}, err
	}
	switch {
	case op.Read && resp.Status == http.StatusNotFound:
		return lincheck.CounterResult{Value: 0}, nil // never increased yet
	case resp.Status != http.StatusOK:
		return lincheck.CounterResult{}, &statusError{status: resp.Status,
			what: fmt.Sprintf("%s %s: status %d: %s", method, path, resp.Status, resp.Body)}
	}
	var c contract.Counter
	if err := json.Unmarshal(resp.Body, &c); err != nil {
		return lincheck.CounterResult{}, err
	}
	return lincheck.CounterResult{Value: c.Value}, nil
}

// TestCounterLinearizableAcrossInstances: three instances on one Redis,
// with one key prefix, and clients sending increases and reads of three
// hot counters to all of them at random: every answer is explained by one
// order of the operations.
func TestCounterLinearizableAcrossInstances(t *testing.T) {
	testenv.Long(t)
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
	if len(failed) > 0 {
		t.Errorf("%d operations failed without faults", len(failed))
	}
	lincheck.CheckLinearizable(t, h)
}

// TestCounterModel: the model accepts what a counter can answer and
// refuses a stale read and a lost increase, so that the check above can
// fail.
func TestCounterModel(t *testing.T) {
	inc := func(c int, call, ret int64, v int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: lincheck.CounterOp{Key: "k"}, Call: call, Output: lincheck.CounterResult{Value: v}, Return: ret}
	}
	read := func(c int, call, ret int64, v int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: lincheck.CounterOp{Key: "k", Read: true}, Call: call, Output: lincheck.CounterResult{Value: v}, Return: ret}
	}
	failed := porcupine.Operation{ClientId: 2, Input: lincheck.CounterOp{Key: "k"}, Call: 0, Output: lincheck.CounterResult{Unknown: true}, Return: math.MaxInt64}
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
			if got := porcupine.CheckOperations(lincheck.CounterModel, tt.ops); got != tt.want {
				t.Errorf("linearizable %v, want %v", got, tt.want)
			}
		})
	}
}
