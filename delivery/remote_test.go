package delivery_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/runtime"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// linkFault breaks the link between two instances in one way, at the
// connection level (see peertest.Proxy), and says what it did.
type linkFault func(rng *rand.Rand, a, b *remotetest.Node, wait func(time.Duration) bool) string

var (
	// cut resets the connections into one instance: what was in flight
	// on them is lost, and the next message dials again.
	cut linkFault = func(rng *rand.Rand, a, b *remotetest.Node, _ func(time.Duration) bool) string {
		n := pick(rng, a, b)
		n.Proxy.Cut()
		return "cut"
	}
	// stall holds the connections into one instance for up to 30 ms: the
	// messages on them are late, in order.
	stall linkFault = func(rng *rand.Rand, a, b *remotetest.Node, wait func(time.Duration) bool) string {
		n := pick(rng, a, b)
		n.Proxy.Hold()
		wait(time.Duration(1+rng.IntN(30)) * time.Millisecond)
		n.Proxy.Release()
		return "stall"
	}
	// duplicate writes bytes of the connections into one instance twice:
	// the transport sees its stream garbled and breaks the connection.
	duplicate linkFault = func(rng *rand.Rand, a, b *remotetest.Node, _ func(time.Duration) bool) string {
		pick(rng, a, b).Proxy.Duplicate()
		return "duplicate"
	}
	// partition cuts the instances apart both ways for up to 100 ms:
	// nothing passes, new connections are refused; at the end the
	// connections that lived through it are reset, as TCP gives up on them.
	// The link then stays whole for 100 to 300 ms: partitions back to back
	// would keep the transport's dial backoff growing and leave the
	// protocol no time to catch up, which tests the schedule, not the
	// protocol.
	partition linkFault = func(rng *rand.Rand, a, b *remotetest.Node, wait func(time.Duration) bool) string {
		for _, n := range []*remotetest.Node{a, b} {
			n.Proxy.Refuse(true)
			n.Proxy.Hold()
		}
		wait(time.Duration(10+rng.IntN(90)) * time.Millisecond)
		for _, n := range []*remotetest.Node{a, b} {
			n.Proxy.Refuse(false)
			n.Proxy.Cut()
		}
		wait(time.Duration(100+rng.IntN(200)) * time.Millisecond)
		return "partition"
	}
)

func pick(rng *rand.Rand, a, b *remotetest.Node) *remotetest.Node {
	if rng.IntN(2) == 0 {
		return a
	}
	return b
}

// remoteCase is a point-to-point run across two instances.
type remoteCase struct {
	name   string
	faults []linkFault
	jobs   int
	chunk  int    // ChunkLargeMessages
	pad    string // padding of every job
	// fewest is the fewest faults a run must see (0: minFaults).
	fewest int
}

// TestRemoteP2PFaults runs point to point with the producer controller on
// one instance and the consumer controller on another, over the real
// transport through fault proxies that cut, stall, garble and partition
// the link at random (20 seeds per case, two at a time; -delivery.remoteseeds=1000
// for a long run): every job arrives exactly once, in order, as the
// protocol promises while no process crashes; the faults are counted.
func TestRemoteP2PFaults(t *testing.T) {
	testenv.Long(t)
	all := []linkFault{cut, stall, duplicate, partition}
	cases := []remoteCase{
		{name: "cuts", faults: []linkFault{cut}, jobs: 400},
		{name: "stalls", faults: []linkFault{stall}, jobs: 400},
		{name: "duplicated bytes", faults: []linkFault{duplicate}, jobs: 400},
		{name: "partitions", faults: []linkFault{partition}, jobs: 1000, fewest: 3},
		// A partition keeps the link whole for 100 to 300 ms after it: the
		// runs with every fault are long enough for several of each.
		{name: "all faults", faults: all, jobs: 1500},
		{name: "all faults, chunked", faults: all, jobs: 1000, chunk: 64, pad: strings.Repeat("x", 200)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, seed := range deliverytest.RemoteSeeds() {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					t.Parallel() // each seed on instances and proxies of its own
					runRemoteP2P(t, c, seed)
				})
			}
		})
	}
}

func runRemoteP2P(t *testing.T, c remoteCase, seed uint64) {
	a, b := remotetest.NewNode(t, "producer-side", nil), remotetest.NewNode(t, "consumer-side", nil)
	col := deliverytest.NewCollector(c.jobs)
	// The producer sends a job every millisecond or two, so that the run
	// lasts long enough for dozens of faults; its last tenth waits until
	// the run has seen the fewest faults it must, however fast the jobs go.
	pace := rand.New(rand.NewPCG(seed, 2))
	var injected atomic.Int64
	sent := 0 // the producer's own count: Delay runs on its actor
	remoteStream(t, a, b, "remote",
		delivery.ProducerSettings{ChunkLargeMessages: c.chunk, ResendFirstInterval: 50 * time.Millisecond},
		delivery.ConsumerSettings{FlowControlWindow: 20, ResendIntervalMin: 20 * time.Millisecond, ResendIntervalMax: 200 * time.Millisecond},
		deliverytest.ProducerSpec{Limit: c.jobs, Pad: c.pad, Delay: func() time.Duration {
			sent++
			if sent > c.jobs*9/10 && injected.Load() < int64(cmp.Or(c.fewest, minFaults)) {
				return 20 * time.Millisecond
			}
			return time.Duration(pace.IntN(3)) * time.Millisecond
		}},
		col)

	counts := injectFaults(t, rand.New(rand.NewPCG(seed, 1)), c.faults, a, b, col, &injected)
	got := col.Jobs()
	for i := range c.jobs {
		if i >= len(got) || got[i] != i+1 {
			t.Fatalf("seed %d: delivery %d is not job %d: %v (faults %v; re-run with -delivery.remoteseed=%d)",
				seed, i, i+1, got[max(0, i-5):min(len(got), i+5)], counts, seed)
		}
	}
	if n := total(counts); n < cmp.Or(c.fewest, minFaults) {
		t.Fatalf("seed %d: only %d faults before every job was in (%v): the run proves nothing", seed, n, counts)
	}
	if len(got) != c.jobs {
		t.Fatalf("seed %d: %d deliveries of %d jobs: duplicates (faults %v)", seed, len(got), c.jobs, counts)
	}
	t.Logf("seed %d: %d jobs in order, none twice; faults %v; dead letters %d+%d (remote %d+%d)", seed, c.jobs, counts,
		a.Sys.DeadLetters(), b.Sys.DeadLetters(), a.Sys.RemoteDeadLetters(), b.Sys.RemoteDeadLetters())
}

// minFaults is the fewest faults a run must have seen.
const minFaults = 5

func total(counts map[string]int) (n int) {
	for _, c := range counts {
		n += c
	}
	return n
}

// injectFaults breaks the link between a and b with faults drawn by rng,
// every few milliseconds, until col has every job or a minute passes,
// counting each into injected as it ends; it returns how many of each it
// injected.
func injectFaults(t *testing.T, rng *rand.Rand, faults []linkFault, a, b *remotetest.Node, col *deliverytest.Collector, injected *atomic.Int64) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	wait := func(d time.Duration) bool { // false once the jobs are in
		select {
		case <-time.After(d):
			return true
		case <-done:
			return false
		}
	}
	counts := map[string]int{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for wait(time.Duration(5+rng.IntN(40)) * time.Millisecond) {
			counts[faults[rng.IntN(len(faults))](rng, a, b, wait)]++
			injected.Add(1)
		}
	}()
	err := col.Wait(ctx)
	close(done)
	wg.Wait()
	a.Proxy.Release()
	b.Proxy.Release()
	if err != nil {
		t.Fatalf("%v (faults %v)", err, counts)
	}
	return counts
}

// remoteStream runs point to point from instance a to instance b: a
// producer controller of producerID and a producer (spec) on a, exposed; a
// consumer controller and a consumer collecting into col on b, registered
// with it over the transport.
func remoteStream(t *testing.T, a, b *remotetest.Node, producerID string, ps delivery.ProducerSettings, cs delivery.ConsumerSettings,
	spec deliverytest.ProducerSpec, col *deliverytest.Collector) {
	t.Helper()
	pc, err := delivery.SpawnProducerController[deliverytest.Job](a.Sys, "pc", producerID, ps)
	if err != nil {
		t.Fatal(err)
	}
	at, err := runtime.Expose(a.Sys, pc)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](b.Sys, "cc", cs)
	if err != nil {
		t.Fatal(err)
	}
	deliverytest.SpawnConsumer(t, b.Sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
	deliverytest.SpawnProducer(t, a.Sys, "producer", pc, spec)
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{
		ProducerController: runtime.RemoteRef[delivery.ProducerCommand[deliverytest.Job]](b.Sys, at.Addr, at.Path),
	})
}
