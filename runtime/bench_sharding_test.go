package runtime_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	trt "github.com/trellis-go/trellis/runtime"
)

// BenchmarkEntityTell: one sender tells 1,000,000 messages round robin to
// 100 sharded entities of one system (Sharding.Tell); baseline: the same
// on a system whose Placement says every entity is here, which is what a
// cluster's placement adds to an entity on its own instance, beyond the
// default.
func BenchmarkEntityTell(b *testing.B) {
	const n, entities = 1_000_000, 100
	plain, placed := newEntityBench(b, nil), newEntityBench(b, everyHere{})
	var basePlain, withPlacement time.Duration
	for b.Loop() {
		basePlain += plain.tell(n, entities)
		withPlacement += placed.tell(n, entities)
	}
	perPlain := float64(basePlain.Nanoseconds()) / float64(n*b.N)
	perPlaced := float64(withPlacement.Nanoseconds()) / float64(n*b.N)
	b.ReportMetric(perPlain, "ns/msg")
	b.ReportMetric(perPlaced, "placed-ns/msg")
	b.Logf("entity tell: %.1f ns without a placement, %.1f ns with one that says here (n=%d)", perPlain, perPlaced, n*b.N)
}

// everyHere places every entity on its own system.
type everyHere struct{}

func (everyHere) Where(string, string) (string, bool) { return "", true }

// entityBench is a system with one entity type whose entities count down
// left, and signal done when it reaches zero.
type entityBench struct {
	region *trt.Sharding[int]
	left   atomic.Int64
	done   chan struct{}
}

func newEntityBench(b *testing.B, p trt.Placement) *entityBench {
	sys := newBenchSystem(b)
	if p != nil {
		if err := sys.Connect(trt.Link{Self: "bench:0", Remote: tellNowhere{}, Placement: p}); err != nil {
			b.Fatal(err)
		}
	}
	e := &entityBench{done: make(chan struct{}, 1)}
	region, err := trt.InitSharding(sys, trt.Entity[int]{Key: trt.NewEntityTypeKey[int]("bench"), PassivateAfter: -1,
		Create: func(string) trt.Behavior[int] {
			return trt.ReceiveFunc(func(*trt.Context[int], int) {
				if e.left.Add(-1) == 0 {
					e.done <- struct{}{}
				}
			})
		}})
	if err != nil {
		b.Fatal(err)
	}
	e.region = region
	return e
}

// tell tells n messages round robin to the entities and waits until they
// have handled them all.
func (e *entityBench) tell(n, entities int) time.Duration {
	ids := make([]string, entities)
	for i := range ids {
		ids[i] = "e" + strconv.Itoa(i)
	}
	e.left.Store(int64(n))
	start := time.Now()
	for i := range n {
		e.region.Tell(ids[i%entities], i)
	}
	<-e.done
	return time.Since(start)
}
