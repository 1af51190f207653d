package delivery

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// TestRandomReplacement: point to point through a link that loses, repeats
// and reorders, while the consumer (and its consumer controller) is
// replaced 2-6 times per run and, with a durable queue (in memory, or on
// Redis), the producer controller (and its producer) 1-2 times. A replaced
// consumer controller is stopped (with its consumer) or left running, at
// random, and a copy of every consumer controller's first RegisterConsumer
// is held back, to arrive after one or more consumer controllers replaced
// it: such late registrations must not take the stream from the consumer
// controller registered last. Every job must arrive. Duplicates are counted and held to what the package
// documentation allows: after a consumer controller is replaced, at most
// FlowControlWindow jobs again (what the old one delivered that its
// producer controller had not heard confirmed); after a producer
// controller is replaced, at most what its durable queue held unconfirmed.
// Each consumer gets its jobs in order, but for one step back where a
// producer controller was replaced under it.
func TestRandomReplacement(t *testing.T) {
	var client *redis.Client
	for _, queue := range []string{"", "memory", "redis"} {
		name := "consumers replaced"
		if queue != "" {
			name = "consumers and producer controllers replaced, durable queue in " + queue
		}
		if queue == "redis" {
			client = testenv.Redis(t)
		}
		c := lossCase{name: name, messages: 300, toCC: [2]float64{0.05, 0.2}, toPC: [2]float64{0.05, 0.2}, dup: 0.1, reorder: 0.1}
		t.Run(name, func(t *testing.T) {
			var dups, allowed atomic.Int64
			runLossCase(t, c, func(c lossCase, seed uint64) error { return runReplaceSeed(c, seed, queue, client, &dups, &allowed) })
			t.Logf("duplicates %d, allowed %d, over %d seeds of %d jobs", dups.Load(), allowed.Load(), *flagSeeds, c.messages)
		})
	}
}

// replaceRun is one seed's flow: the producer controller and consumer
// controller of the moment, and what each consumer got.
type replaceRun struct {
	*lossRun
	id      string
	opts    []ProducerOption[job]
	pc      runtime.Ref[ProducerCommand[job]]
	prod    runtime.Ref[prodMsg]
	cc      runtime.Ref[ConsumerCommand[job]]
	cons    runtime.Ref[consMsg]
	cols    []*collector // one per consumer, in turn
	links   []*faultLink[job]
	linkCol []int // for each link, the index in cols of its consumer
	pcs     int   // producer controllers so far
	watcher *watcher
}

func (x *replaceRun) startProducer() error {
	x.pcs++
	pc, err := SpawnProducerController[job](x.sys, fmt.Sprintf("pc%d", x.pcs), x.id, x.ps, x.opts...)
	if err != nil {
		return err
	}
	x.pc = pc
	x.prod = spawnProducer(x.rt, x.sys, fmt.Sprintf("producer%d", x.pcs), pc, producerSpec{bySeqNr: true, delay: x.producerDelayFunc()})
	return nil
}

func (x *replaceRun) startConsumer() error {
	cc, err := SpawnConsumerController[job](x.sys, fmt.Sprintf("cc%d", len(x.cols)+1), x.cs)
	if err != nil {
		return err
	}
	col := newCollector(x.c.messages)
	x.cc, x.cols = cc, append(x.cols, col)
	spec := x.consumerSpec()
	spec.started = true // started before anything can stop it: its controller watches it
	x.cons = spawnConsumer(x.rt, x.sys, fmt.Sprintf("consumer%d", len(x.cols)), cc, spec, col)
	return nil
}

// connect puts a link of its own between the current producer controller
// and consumer controller, and registers. The link passes the first
// RegisterConsumer on and holds a copy of it, for releaseLate.
//
// It returns once the consumer controller has sent that RegisterConsumer.
// A registration is numbered when the consumer controller handles
// RegisterToProducerController, not when it is told: one told earlier
// but handled later is the later registration, and wins. Without the
// wait, a replaced consumer controller still running, slow to handle
// its registration with a new producer controller, could register after
// its successor, and take the stream from it, as it is entitled to.
func (x *replaceRun) connect(deadline time.Time) error {
	toCC, toPC := x.faults()
	l := newFaultLink[job](x.rt, x.sys, fmt.Sprintf("link%d-%d", x.pcs, len(x.cols)), x.pc, x.cc, toCC, toPC,
		x.seed+uint64(x.pcs)<<40+uint64(len(x.cols))<<20)
	copied := false // the gate runs under the link's lock
	l.setGate(func(m any) verdict {
		if _, ok := m.(RegisterConsumer[job]); ok && !copied {
			copied = true
			return holdCopy
		}
		return pass
	})
	x.links, x.linkCol = append(x.links, l), append(x.linkCol, len(x.cols)-1)
	x.cc.Tell(RegisterToProducerController[job]{ProducerController: l.toPC})
	for l.heldCount(isRegisterConsumer) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer controller %d did not register", len(x.cols))
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
	return nil
}

func isRegisterConsumer(m any) bool { _, ok := m.(RegisterConsumer[job]); return ok }

// releaseLate waits until the current consumer got a job, which shows
// that its consumer controller's registration was taken, then sends on,
// each with probability p, the held registrations of the links of earlier
// consumers: late, from a consumer controller replaced since.
func (x *replaceRun) releaseLate(p float64, deadline time.Time) error {
	current := x.cols[len(x.cols)-1]
	for current.count() == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer %d got no job; links: %s\n\tlog tail:\n%s", len(x.cols), describeLinks(x.links), x.logs.tail(30))
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
	for i, l := range x.links {
		if x.linkCol[i] < len(x.cols)-1 && x.rng.Float64() < p {
			l.release(isRegisterConsumer)
		}
	}
	return nil
}

// arrived is how many of jobs 1..n some consumer got, and how many more
// deliveries of them there were.
func (x *replaceRun) arrived() (distinct, dups int) {
	seen := make(map[int]int)
	for _, col := range x.cols {
		col.mu.Lock()
		for j, k := range col.seen {
			seen[j] += k
		}
		col.mu.Unlock()
	}
	for _, k := range seen {
		dups += k - 1
	}
	return len(seen), dups
}

func (x *replaceRun) waitArrived(n int, deadline time.Time) error {
	for {
		if d, _ := x.arrived(); d >= n {
			return nil
		}
		if time.Now().After(deadline) {
			d, _ := x.arrived()
			return fmt.Errorf("%d of jobs 1..%d arrived, want %d; links: %s\n\tlog tail:\n%s", d, x.c.messages, n, describeLinks(x.links), x.logs.tail(30))
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
}

func runReplaceSeed(c lossCase, seed uint64, queue string, client *redis.Client, dupsTotal, allowedTotal *atomic.Int64) (err error) {
	r := newLossRun(c, seed)
	defer r.close(&err)
	x := &replaceRun{lossRun: r, id: fmt.Sprint("p-", seed)}
	var q durable.Queue[job]
	switch queue {
	case "memory":
		q = durable.NewMemory[job]()
	case "redis":
		rq, err := redisqueue.New[job](client, fmt.Sprintf("trellis-test-replace:%d:%d", time.Now().UnixNano(), seed), nil)
		if err != nil {
			return err
		}
		defer func() { _ = rq.Delete(context.Background()) }()
		q = rq
	}
	if q != nil {
		x.opts = []ProducerOption[job]{WithDurableQueue(q)}
	}
	x.watcher = newWatcher(r.rt, r.sys)
	if err := x.startProducer(); err != nil {
		return err
	}
	if err := x.startConsumer(); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	if err := x.connect(deadline); err != nil {
		return err
	}

	// The replacements, at random points of the flow.
	type event struct {
		at       int  // after this many jobs arrived
		producer bool // replace the producer controller, else the consumer
	}
	var events []event
	for range 2 + r.rng.IntN(5) {
		events = append(events, event{at: c.messages/10 + r.rng.IntN(c.messages*8/10)})
	}
	if q != nil {
		for range 1 + r.rng.IntN(2) {
			events = append(events, event{at: c.messages/10 + r.rng.IntN(c.messages*8/10), producer: true})
		}
	}
	slices.SortFunc(events, func(a, b event) int { return a.at - b.at })
	allowed, pcReplaced := 0, 0
	for _, e := range events {
		if err := x.waitArrived(e.at, deadline); err != nil {
			return fmt.Errorf("%s: %w", r.params(), err)
		}
		if !e.producer {
			if r.rng.IntN(2) == 0 {
				r.sys.Stop(x.cons) // its consumer controller stops with it
			} // else it runs on, replaced
			allowed += r.cs.FlowControlWindow
			if err := x.startConsumer(); err != nil {
				return err
			}
			if err := x.connect(deadline); err != nil {
				return err
			}
			if err := x.releaseLate(0.5, deadline); err != nil {
				return fmt.Errorf("%s: %w", r.params(), err)
			}
			continue
		}
		x.watcher.watch(x.pc)
		r.sys.Stop(x.prod)
		r.sys.Stop(x.pc)
		select {
		case <-x.watcher.stopped:
		case <-time.After(waitLimit):
			return fmt.Errorf("producer controller %d did not stop", x.pcs)
		}
		s, err := q.LoadState(context.Background())
		if err != nil {
			return err
		}
		allowed += len(s.Unconfirmed)
		pcReplaced++
		if err := x.startProducer(); err != nil {
			return err
		}
		if err := x.connect(deadline); err != nil {
			return err
		}
	}
	if err := x.releaseLate(1, deadline); err != nil {
		return fmt.Errorf("%s: %w", r.params(), err)
	}
	if err := x.waitArrived(c.messages, deadline); err != nil {
		return fmt.Errorf("%s: %w", r.params(), err)
	}
	if r.rt.failed() {
		return fmt.Errorf("%s: %s", r.params(), r.rt.errors())
	}
	_, dups := x.arrived()
	dupsTotal.Add(int64(dups))
	allowedTotal.Add(int64(allowed))
	if dups > allowed {
		return fmt.Errorf("%s: %d duplicates, more than the %d the replacements allow (%d events)", r.params(), dups, allowed, len(events))
	}
	steps := 0
	for _, col := range x.cols {
		got := col.jobs()
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				steps++
			}
		}
	}
	if steps > pcReplaced {
		return fmt.Errorf("%s: %d steps back in what the consumers got, %d producer controllers replaced", r.params(), steps, pcReplaced)
	}
	return nil
}
