package delivery_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
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
	testenv.Long(t)
	var client *redis.Client
	for _, queue := range []string{"", "memory", "redis"} {
		name := "consumers replaced"
		if queue != "" {
			name = "consumers and producer controllers replaced, durable queue in " + queue
		}
		if queue == "redis" {
			client = testenv.Redis(t)
		}
		c := deliverytest.LossCase{Name: name, Messages: 300, ToCC: [2]float64{0.05, 0.2}, ToPC: [2]float64{0.05, 0.2}, Dup: 0.1, Reorder: 0.1}
		t.Run(name, func(t *testing.T) {
			var dups, allowed atomic.Int64
			deliverytest.RunLossCase(t, c, func(c deliverytest.LossCase, seed uint64) error {
				return runReplaceSeed(c, seed, queue, client, &dups, &allowed)
			})
			t.Logf("duplicates %d, allowed %d, over %d seeds of %d jobs", dups.Load(), allowed.Load(), *deliverytest.FlagSeeds, c.Messages)
		})
	}
}

// replaceRun is one seed's flow: the producer controller and consumer
// controller of the moment, and what each consumer got.
type replaceRun struct {
	*deliverytest.LossRun
	id      string
	opts    []delivery.ProducerOption[deliverytest.Job]
	pc      runtime.Ref[delivery.ProducerCommand[deliverytest.Job]]
	prod    runtime.Ref[deliverytest.ProdMsg]
	cc      runtime.Ref[delivery.ConsumerCommand[deliverytest.Job]]
	cons    runtime.Ref[deliverytest.ConsMsg]
	cols    []*deliverytest.Collector // one per consumer, in turn
	links   []*deliverytest.FaultLink[deliverytest.Job]
	linkCol []int // for each link, the index in cols of its consumer
	pcs     int   // producer controllers so far
	watcher *deliverytest.Watcher
}

func (x *replaceRun) startProducer() error {
	x.pcs++
	pc, err := delivery.SpawnProducerController[deliverytest.Job](x.Sys, fmt.Sprintf("pc%d", x.pcs), x.id, x.Producer, x.opts...)
	if err != nil {
		return err
	}
	x.pc = pc
	x.prod = deliverytest.SpawnProducer(x.TB, x.Sys, fmt.Sprintf("producer%d", x.pcs), pc, deliverytest.ProducerSpec{BySeqNr: true, Delay: x.ProducerDelayFunc()})
	return nil
}

func (x *replaceRun) startConsumer() error {
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](x.Sys, fmt.Sprintf("cc%d", len(x.cols)+1), x.Consumer)
	if err != nil {
		return err
	}
	col := deliverytest.NewCollector(x.C.Messages)
	x.cc, x.cols = cc, append(x.cols, col)
	spec := x.ConsumerSpec()
	spec.Started = true // started before anything can stop it: its controller watches it
	x.cons = deliverytest.SpawnConsumer(x.TB, x.Sys, fmt.Sprintf("consumer%d", len(x.cols)), cc, spec, col)
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
	toCC, toPC := x.Faults()
	l := deliverytest.NewFaultLink[deliverytest.Job](x.TB, x.Sys, fmt.Sprintf("link%d-%d", x.pcs, len(x.cols)), x.pc, x.cc, toCC, toPC,
		x.Seed+uint64(x.pcs)<<40+uint64(len(x.cols))<<20)
	copied := false // the gate runs under the link's lock
	l.SetGate(func(m any) deliverytest.Verdict {
		if _, ok := m.(delivery.RegisterConsumer[deliverytest.Job]); ok && !copied {
			copied = true
			return deliverytest.HoldCopy
		}
		return deliverytest.Pass
	})
	x.links, x.linkCol = append(x.links, l), append(x.linkCol, len(x.cols)-1)
	x.cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: l.ToPC})
	for l.HeldCount(isRegisterConsumer) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer controller %d did not register", len(x.cols))
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
	return nil
}

func isRegisterConsumer(m any) bool {
	_, ok := m.(delivery.RegisterConsumer[deliverytest.Job])
	return ok
}

// releaseLate waits until the current consumer got a job, which shows
// that its consumer controller's registration was taken, then sends on,
// each with probability p, the held registrations of the links of earlier
// consumers: late, from a consumer controller replaced since.
func (x *replaceRun) releaseLate(p float64, deadline time.Time) error {
	current := x.cols[len(x.cols)-1]
	for current.Count() == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer %d got no job; links: %s\n\t%s\n\tlog tail:\n%s", len(x.cols), deliverytest.DescribeLinks(x.links), x.Logs.Errors(10), x.Logs.Tail(30))
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
	for i, l := range x.links {
		if x.linkCol[i] < len(x.cols)-1 && x.RNG.Float64() < p {
			l.Release(isRegisterConsumer)
		}
	}
	return nil
}

// arrived is how many of jobs 1..n some consumer got, and how many more
// deliveries of them there were.
func (x *replaceRun) arrived() (distinct, dups int) {
	seen := make(map[int]int)
	for _, col := range x.cols {
		col.Mu.Lock()
		for j, k := range col.Seen {
			seen[j] += k
		}
		col.Mu.Unlock()
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
			return fmt.Errorf("%d of jobs 1..%d arrived, want %d; links: %s\n\t%s\n\tlog tail:\n%s", d, x.C.Messages, n, deliverytest.DescribeLinks(x.links), x.Logs.Errors(10), x.Logs.Tail(30))
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
}

func runReplaceSeed(c deliverytest.LossCase, seed uint64, queue string, client *redis.Client, dupsTotal, allowedTotal *atomic.Int64) (err error) {
	r := deliverytest.NewLossRun(c, seed)
	defer r.Close(&err)
	x := &replaceRun{LossRun: r, id: fmt.Sprint("p-", seed)}
	var q durable.Queue[deliverytest.Job]
	switch queue {
	case "memory":
		q = durable.NewMemory[deliverytest.Job]()
	case "redis":
		rq, err := redisqueue.New[deliverytest.Job](client, fmt.Sprintf("trellis-test-replace:%d:%d", time.Now().UnixNano(), seed), nil)
		if err != nil {
			return err
		}
		defer func() { _ = rq.Delete(context.Background()) }()
		q = rq
		r.OnRealStore()
	}
	if q != nil {
		x.opts = []delivery.ProducerOption[deliverytest.Job]{delivery.WithDurableQueue(q)}
	}
	x.watcher = deliverytest.NewWatcher(r.TB, r.Sys)
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
	for range 2 + r.RNG.IntN(5) {
		events = append(events, event{at: c.Messages/10 + r.RNG.IntN(c.Messages*8/10)})
	}
	if q != nil {
		for range 1 + r.RNG.IntN(2) {
			events = append(events, event{at: c.Messages/10 + r.RNG.IntN(c.Messages*8/10), producer: true})
		}
	}
	slices.SortFunc(events, func(a, b event) int { return a.at - b.at })
	allowed, pcReplaced := 0, 0
	for _, e := range events {
		if err := x.waitArrived(e.at, deadline); err != nil {
			return fmt.Errorf("%s: %w", r.Params(), err)
		}
		if !e.producer {
			if r.RNG.IntN(2) == 0 {
				r.Sys.Stop(x.cons) // its consumer controller stops with it
			} // else it runs on, replaced
			allowed += r.Consumer.FlowControlWindow
			if err := x.startConsumer(); err != nil {
				return err
			}
			if err := x.connect(deadline); err != nil {
				return err
			}
			if err := x.releaseLate(0.5, deadline); err != nil {
				return fmt.Errorf("%s: %w", r.Params(), err)
			}
			continue
		}
		x.watcher.Watch(x.pc)
		r.Sys.Stop(x.prod)
		r.Sys.Stop(x.pc)
		select {
		case <-x.watcher.Stopped:
		case <-time.After(deliverytest.WaitLimit):
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
		return fmt.Errorf("%s: %w", r.Params(), err)
	}
	if err := x.waitArrived(c.Messages, deadline); err != nil {
		return fmt.Errorf("%s: %w", r.Params(), err)
	}
	if r.TB.Failed() {
		return fmt.Errorf("%s: %s", r.Params(), r.TB.Errors())
	}
	_, dups := x.arrived()
	dupsTotal.Add(int64(dups))
	allowedTotal.Add(int64(allowed))
	if dups > allowed {
		return fmt.Errorf("%s: %d duplicates, more than the %d the replacements allow (%d events)", r.Params(), dups, allowed, len(events))
	}
	steps := 0
	for _, col := range x.cols {
		got := col.Jobs()
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				steps++
			}
		}
	}
	if steps > pcReplaced {
		return fmt.Errorf("%s: %d steps back in what the consumers got, %d producer controllers replaced", r.Params(), steps, pcReplaced)
	}
	return nil
}
