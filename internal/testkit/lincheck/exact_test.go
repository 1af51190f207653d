package lincheck

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestCheckCountersAgreesWithPorcupine: on random small histories of two
// counters, some linearizable by construction and some broken on purpose,
// the exact check and porcupine give the same verdict, and both kinds of
// verdict occur.
func TestCheckCountersAgreesWithPorcupine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	verdicts := map[bool]int{}
	for i := range 3000 {
		ops := randomHistory(rng, 2+rng.IntN(9))
		want := porcupine.CheckOperations(CounterModel, ops)
		err := CheckCounters(ops)
		if got := err == nil; got != want {
			t.Fatalf("history %d: exact check says linearizable %v (%v), porcupine %v:\n%v", i, got, err, want, describe(ops))
		}
		verdicts[want]++
	}
	if verdicts[true] < 100 || verdicts[false] < 100 {
		t.Fatalf("verdicts %v: want many of each", verdicts)
	}
	t.Logf("verdicts: %v", verdicts)
}

// randomHistory makes n operations on two counters by clients that
// overlap: each takes effect at a random point inside its interval on a
// real counter, and its answer is what that counter said, unless the
// operation failed (unknown: it took effect or not) or its answer is
// off by one on purpose (rarely, so that most histories stay
// linearizable).
func randomHistory(rng *rand.Rand, n int) []porcupine.Operation {
	ops := make([]porcupine.Operation, n)
	points := make([]int64, n)
	for i := range ops {
		call := rng.Int64N(40)
		ret := call + 1 + rng.Int64N(15)
		key := []string{"a", "b"}[rng.IntN(2)]
		ops[i] = porcupine.Operation{ClientId: i, Input: CounterOp{Key: key, Read: rng.IntN(3) == 0}, Call: call, Return: ret}
		points[i] = call + rng.Int64N(ret-call+1)
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	// Effects in the order of their points (ties in the shuffled order).
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(points[a], points[b]) })
	value := map[string]int64{}
	for _, i := range order {
		in := ops[i].Input.(CounterOp)
		failed := rng.IntN(6) == 0
		applies := !failed || rng.IntN(2) == 0
		if !in.Read && applies {
			value[in.Key]++
		}
		out := CounterResult{Value: value[in.Key]}
		if rng.IntN(12) == 0 {
			out.Value += int64(rng.IntN(3)) - 1
		}
		if failed {
			out, ops[i].Return = CounterResult{Unknown: true}, math.MaxInt64
		}
		ops[i].Output = out
	}
	return ops
}

func describe(ops []porcupine.Operation) string {
	var b []byte
	for _, op := range ops {
		ret := fmt.Sprint(op.Return)
		if op.Return == math.MaxInt64 {
			ret = "inf"
		}
		b = fmt.Appendf(b, "\t%s [%d, %s]\n", CounterModel.DescribeOperation(op.Input, op.Output), op.Call, ret)
	}
	return string(b)
}

// TestCheckCountersLongHistory: a history of 100,000 operations on one
// counter, by 16 overlapping clients, with unknown outcomes among them,
// is checked in seconds (porcupine gives up on it); the same with one
// answer off by one is not linearizable.
func TestCheckCountersLongHistory(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, clients = 100_000, 16
	ops := make([]porcupine.Operation, 0, n)
	value, now := int64(0), int64(0)
	for i := range n {
		now += 1 + rng.Int64N(3)
		op := porcupine.Operation{ClientId: i % clients, Input: CounterOp{Key: "hot", Read: rng.IntN(3) == 0}, Call: now - rng.Int64N(20)}
		if !op.Input.(CounterOp).Read {
			value++
		}
		op.Output, op.Return = CounterResult{Value: value}, now+rng.Int64N(20)
		if rng.IntN(500) == 0 {
			op.Output, op.Return = CounterResult{Unknown: true}, math.MaxInt64
		}
		ops = append(ops, op)
	}
	start := time.Now()
	if err := CheckCounters(ops); err != nil {
		t.Fatalf("a linearizable history: %v", err)
	}
	t.Logf("%d operations checked in %v", n, time.Since(start))
	for i := n / 2; ; i++ {
		if out := ops[i].Output.(CounterResult); !out.Unknown && !ops[i].Input.(CounterOp).Read {
			ops[i].Output = CounterResult{Value: out.Value + 1}
			break
		}
	}
	if err := CheckCounters(ops); err == nil {
		t.Fatal("an increase answered one more than its own: linearizable, want not")
	}
}
