package deliverytest

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// LossCase is one row of the acceptance test's table.
type LossCase struct {
	Name     string
	Messages int              // jobs that must arrive
	ToCC     [2]float64       // range of the drop probability of SequencedMessage
	ToPC     [2]float64       // range of the drop probability of Request, Resend, Ack, RegisterConsumer
	Queue    [2]float64       // range of the durable queue's failure probability; zero: no queue
	OnlyFlow bool             // OnlyFlowControl: lost messages stay lost
	Chunk    int              // ChunkLargeMessages; 0: no chunking
	Dup      float64          // probability that the link repeats a message, each way
	Reorder  float64          // probability that the link delays a message, so others overtake it
	Delays   bool             // producer and consumer wait 0-40ms (scaled) per message
	Window   int              // flow control window; 0: 20, as in the spec
	Churn    bool             // work pulling only: a worker leaves, and another joins, mid-stream
	Lag      time.Duration    // the link holds every message back up to this, keeping order
	Resend   [2]time.Duration // ResendIntervalMin and Max, unscaled; zero: the spec's, scaled
}

// LossCases are the rows of the acceptance test's table: each base case
// as it is, and again with 1-byte chunks.
func LossCases() []LossCase {
	base := []LossCase{
		{Name: "flaky network", Messages: 63, ToCC: [2]float64{0.1, 0.3}, ToPC: [2]float64{0.1, 0.3}, Delays: true},
		{Name: "flaky durable queue", Messages: 31, Queue: [2]float64{0.1, 0.2}, Delays: true},
		{Name: "flaky network and durable queue", Messages: 17, ToCC: [2]float64{0.1, 0.2}, ToPC: [2]float64{0.1, 0.2}, Queue: [2]float64{0.1, 0.2}, Delays: true},
		{Name: "without resending", Messages: 63, ToCC: [2]float64{0.1, 0.5}, ToPC: [2]float64{0.1, 0.4}, OnlyFlow: true, Delays: true},
		// Beyond the spec: a network that also repeats and reorders.
		{Name: "duplicating reordering network", Messages: 63, ToCC: [2]float64{0.05, 0.2}, ToPC: [2]float64{0.05, 0.2}, Dup: 0.1, Reorder: 0.1, Delays: true},
		{Name: "duplicating reordering network, durable queue", Messages: 31, ToCC: [2]float64{0.05, 0.2}, ToPC: [2]float64{0.05, 0.2}, Queue: [2]float64{0.1, 0.2}, Dup: 0.1, Reorder: 0.1, Delays: true},
	}
	var out []LossCase
	for _, c := range base {
		out = append(out, c)
		c.Name += ", 1-byte chunks"
		c.Chunk = 1
		out = append(out, c)
	}
	return out
}

// FlowOnlyChunkCases are flow control only with every message in 3 to 4
// chunks, at the smallest windows, through a slow link that keeps order
// and loses and repeats messages each way: a chunk lost in the middle or at
// the end of a message must neither stop the stream nor hold it for long.
func FlowOnlyChunkCases() []LossCase {
	var out []LossCase
	for _, w := range []int{2, 3, 4} {
		out = append(out, LossCase{Name: fmt.Sprintf("window %d, 3-byte chunks", w), Messages: 100,
			ToCC: [2]float64{0.05, 0.2}, ToPC: [2]float64{0.1, 0.25}, Dup: 0.1, Lag: 2 * time.Millisecond,
			OnlyFlow: true, Chunk: 3, Window: w, Resend: [2]time.Duration{2 * time.Millisecond, 40 * time.Millisecond}})
	}
	return out
}

// RunLossCase runs c with every seed, several at a time, and reports each
// failing seed. run runs one seed: point to point, work pulling or
// sharding.
func RunLossCase(t *testing.T, c LossCase, run func(c LossCase, seed uint64) error) {
	seeds := make([]uint64, 0, *FlagSeeds)
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		base := uint64(time.Now().UnixNano())
		for i := range *FlagSeeds {
			seeds = append(seeds, base+uint64(i)*0x9e3779b97f4a7c15)
		}
	}
	t.Logf("seeds %d..: re-run one with -delivery.seed=SEED", seeds[0])
	test, _, _ := strings.Cut(t.Name(), "/")
	sem := make(chan struct{}, max(1, *FlagParallel))
	var wg sync.WaitGroup
	for _, seed := range seeds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := run(c, seed); err != nil {
				t.Errorf("seed %d: %v\n\tre-run: go test ./delivery -run '^%s$/^%s$' -delivery.seed=%d",
					seed, err, test, regexpName(c.Name), seed)
			}
		}()
	}
	wg.Wait()
}

func regexpName(name string) string {
	out := []rune{}
	for _, r := range name {
		switch r {
		case ' ':
			out = append(out, '_')
		case ',', '(', ')', '.':
			out = append(out, '.')
		default:
			out = append(out, r)
		}
	}
	return string(out)
}

var lossLogLevel = slog.LevelInfo

func scaled(d time.Duration) time.Duration {
	return max(time.Duration(float64(d)**flagScale), time.Millisecond)
}

// LossRun is what one seed of a case sets up, whatever the pattern: the
// parameters drawn from the seed, an actor system of its own, and the
// settings of the controllers.
type LossRun struct {
	C                                        LossCase
	Seed                                     uint64
	RNG                                      *rand.Rand // for the pattern's own draws, after the common ones
	pToCC, pToPC, pQueue                     float64
	consumerDelay, producerDelay, queueDelay time.Duration
	Sys                                      *runtime.System
	Logs                                     *LogBuffer
	TB                                       *seedT // the testing.TB of the helpers
	Consumer                                 delivery.ConsumerSettings
	Producer                                 delivery.ProducerSettings
}

// NewLossRun draws the parameters of c from seed and starts the run's
// actor system; Close shuts it down.
func NewLossRun(c LossCase, seed uint64) *LossRun {
	r := &LossRun{C: c, Seed: seed, RNG: rand.New(rand.NewPCG(seed, 0)), TB: &seedT{}}
	between := func(b [2]float64) float64 { return b[0] + r.RNG.Float64()*(b[1]-b[0]) }
	r.pToCC, r.pToPC, r.pQueue = between(c.ToCC), between(c.ToPC), between(c.Queue)
	if c.Delays {
		r.consumerDelay = scaled(time.Duration(r.RNG.IntN(40)) * time.Millisecond)
		r.producerDelay = scaled(time.Duration(r.RNG.IntN(40)) * time.Millisecond)
		r.queueDelay = scaled(time.Duration(r.RNG.IntN(40)) * time.Millisecond)
	}
	// A test's t is not usable from these goroutines for cleanup; the
	// system is shut down by close, and its log kept for the failure report.
	r.Logs = &LogBuffer{}
	var w io.Writer = r.Logs
	log := slog.New(keepErrors{Handler: slog.NewTextHandler(w, &slog.HandlerOptions{Level: lossLogLevel}), logs: r.Logs})
	r.Sys = runtime.NewSystem(fmt.Sprintf("loss-%d", seed), runtime.WithLogger(log))
	window := c.Window
	if window == 0 {
		window = 20
	}
	r.Consumer = delivery.ConsumerSettings{
		FlowControlWindow: window,
		ResendIntervalMin: scaled(500 * time.Millisecond),
		ResendIntervalMax: scaled(2 * time.Second),
		OnlyFlowControl:   c.OnlyFlow,
	}
	if c.Resend[0] > 0 {
		r.Consumer.ResendIntervalMin, r.Consumer.ResendIntervalMax = c.Resend[0], c.Resend[1]
	}
	r.Producer = delivery.ProducerSettings{
		ChunkLargeMessages:         c.Chunk,
		ResendFirstInterval:        scaled(time.Second),
		DurableQueueRequestTimeout: scaled(3 * time.Second),
		DurableQueueRetryBackoff:   scaled(100 * time.Millisecond),
	}
	return r
}

// Close shuts the system down; err is the seed's outcome so far.
func (r *LossRun) Close(err *error) {
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	if serr := r.Sys.Shutdown(ctx); serr != nil && *err == nil {
		*err = serr
	}
}

// OnRealStore gives the durable queue calls the default timeout instead
// of the scaled one: the scaled timeouts suit the simulated queue, whose
// calls take what the case draws, while a real Redis's calls (a load of a
// thousand unconfirmed messages, on a loaded machine, under the race
// detector) take what they take, and a controller that gives up on them
// fails the run for the machine's sake, not the protocol's.
func (r *LossRun) OnRealStore() {
	r.Producer.DurableQueueRequestTimeout = delivery.DefaultDurableQueueRequestTimeout
}

// Params describes the drawn parameters, for the failure report.
func (r *LossRun) Params() string {
	return fmt.Sprintf("drop to cc %.2f, to pc %.2f, queue failure %.2f, delays consumer %v producer %v queue %v",
		r.pToCC, r.pToPC, r.pQueue, r.consumerDelay, r.producerDelay, r.queueDelay)
}

// QueueOpts are the producer options of the case's durable queue: a flaky
// one in memory, or none.
func (r *LossRun) QueueOpts() []delivery.ProducerOption[Job] {
	if r.C.Queue[1] == 0 {
		return nil
	}
	return []delivery.ProducerOption[Job]{delivery.WithDurableQueue[Job](newFlakyQueue[Job](durable.NewMemory[Job](), r.pQueue, r.queueDelay, r.Seed))}
}

// Faults are what a link does each way, from the case and the draws.
func (r *LossRun) Faults() (toCC, toPC Faults) {
	maxDelay := scaled(100 * time.Millisecond)
	return Faults{drop: r.pToCC, dup: r.C.Dup, delay: r.C.Reorder, maxDelay: maxDelay, lag: r.C.Lag},
		Faults{drop: r.pToPC, dup: r.C.Dup, delay: r.C.Reorder, maxDelay: maxDelay, lag: r.C.Lag}
}

// ConsumerSpec is the consumers' behavior: the drawn consumer delay, if
// any.
func (r *LossRun) ConsumerSpec() ConsumerSpec {
	if d := r.consumerDelay; d > 0 {
		return ConsumerSpec{Delay: func() time.Duration { return d }}
	}
	return ConsumerSpec{}
}

// ProducerDelayFunc returns the drawn producer delay per message, or nil
// if there is none.
func (r *LossRun) ProducerDelayFunc() func() time.Duration {
	if d := r.producerDelay; d > 0 {
		return func() time.Duration { return d }
	}
	return nil
}

// Wait waits for col, a minute at most; what is wrong is an error.
func (r *LossRun) Wait(col *Collector, describe func() string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		return fmt.Errorf("%s: %w\n\tlinks: %s\n\tlog tail:\n%s", r.Params(), err, describe(), r.Logs.Tail(20))
	}
	if r.TB.Failed() {
		return fmt.Errorf("%s: %s", r.Params(), r.TB.Errors())
	}
	return nil
}

// seedT is a testing.TB for the helpers run by a seed's goroutine: it
// records failures instead of stopping the goroutine.
type seedT struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (s *seedT) Helper() {}

func (s *seedT) Errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}

func (s *seedT) Fatalf(format string, args ...any) { s.Errorf(format, args...) }

func (s *seedT) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errs) > 0
}

func (s *seedT) Errors() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.errs)
}

// Describe counts what the link did each way, for the failure report.
func (l *FaultLink[A]) Describe() string {
	st := func(s *linkStats) string {
		return fmt.Sprintf("passed %d dropped %d duplicated %d delayed %d", s.Passed.Load(), s.dropped.Load(), s.duplicated.Load(), s.delayed.Load())
	}
	return "to cc: " + st(&l.toCCStats) + "; to pc: " + st(&l.ToPCStats)
}

// RunWorkPullingLossSeed runs one case through a work-pulling producer
// controller and 2-4 workers, each behind a lossy link of its own.
func RunWorkPullingLossSeed(c LossCase, seed uint64) (err error) {
	r := NewLossRun(c, seed)
	defer r.Close(&err)
	workers := 2 + r.RNG.IntN(3)
	key := runtime.NewServiceKey[delivery.ConsumerCommand[Job]]("workers")
	col := NewCollectorAll(c.Messages)
	limit := c.Messages
	if c.OnlyFlow {
		// Lost jobs stay lost: send until one numbered c.messages or more
		// arrives.
		col, limit = NewCollector(c.Messages), 0
	}
	toCC, toPC := r.Faults()
	links := make([]*FaultLink[Job], workers)
	var leaving *Worker
	for i := range workers {
		w := SpawnWorker(r.TB, r.Sys, fmt.Sprintf("worker%d", i), key,
			WorkerSpec{Consumer: r.Consumer, Spec: r.ConsumerSpec(), toCC: &toCC, toPC: toPC, seed: seed + uint64(i)<<32}, col)
		links[i] = w.link
		leaving = w
	}
	wp, err := workpulling.SpawnProducerController[Job](r.Sys, "wp", fmt.Sprint("wp-", seed), key, workpulling.Settings{Producer: r.Producer}, r.QueueOpts()...)
	if err != nil {
		return err
	}
	SpawnProducer(r.TB, r.Sys, "producer", nil, ProducerSpec{Limit: limit, Delay: r.ProducerDelayFunc(), Connect: WorkPullingConnect(wp)})
	describe := func() string { return DescribeLinks(links) }
	if c.Churn {
		if err := waitFor(func() bool { return col.Count() >= c.Messages/3 }); err != nil {
			return fmt.Errorf("%s: before the churn: %w", r.Params(), err)
		}
		w := SpawnWorker(r.TB, r.Sys, "worker-new", key,
			WorkerSpec{Consumer: r.Consumer, Spec: r.ConsumerSpec(), toCC: &toCC, toPC: toPC, seed: seed + uint64(workers)<<32}, col)
		links = append(links, w.link)
		leaving.Stop(r.Sys)
	}
	if err := r.Wait(col, describe); err != nil {
		return err
	}
	if c.Churn {
		return nil // every job arrived: what the collector waited for
	}
	if err := checkLossDeliveries(c, col); err != nil {
		return fmt.Errorf("%s, %d workers: %w\n\tlinks: %s", r.Params(), workers, err, describe())
	}
	return nil
}

// RunShardingLossSeed runs one case through a sharding producer controller
// to 5-20 entities, each behind a lossy link of its own.
func RunShardingLossSeed(c LossCase, seed uint64) (err error) {
	r := NewLossRun(c, seed)
	defer r.Close(&err)
	entities := 5 + r.RNG.IntN(16)
	col := NewCollectorAll(c.Messages)
	limit := c.Messages
	if c.OnlyFlow {
		col, limit = NewCollector(c.Messages), 0
	}
	region := StartRegion(r.TB, r.Sys, RegionSpec{Settings: sharding.ConsumerSettings{Consumer: r.Consumer}, Consumer: r.ConsumerSpec()}, col)
	toCC, toPC := r.Faults()
	links := &linkRegion{t: r.TB, sys: r.Sys, region: region, toCC: toCC, toPC: toPC, seed: seed, links: make(map[string]*FaultLink[Job])}
	ss := sharding.Settings{Producer: r.Producer, ResendFirstUnconfirmedIdleTimeout: scaled(10 * delivery.DefaultResendIntervalMin)}
	sp, err := sharding.SpawnProducerController[Job](r.Sys, "sp", fmt.Sprint("sp-", seed), links, ss, r.QueueOpts()...)
	if err != nil {
		return err
	}
	SpawnProducer(r.TB, r.Sys, "producer", nil, ProducerSpec{Limit: limit, Delay: r.ProducerDelayFunc(),
		Connect: ShardingConnect(sp), Entity: EntityOf(entities)})
	if err := r.Wait(col, links.describe); err != nil {
		return err
	}
	if err := checkLossDeliveries(c, col); err != nil {
		return fmt.Errorf("%s, %d entities: %w\n\tlinks: %s", r.Params(), entities, err, links.describe())
	}
	return nil
}

// checkLossDeliveries checks what a work-pulling or sharding case
// delivered: per producer id (a worker, an entity) strictly increasing, no
// job twice, and, with resending, every job once.
func checkLossDeliveries(c LossCase, col *Collector) error {
	ds := col.Deliveries()
	if err := PerEntityOrder(ds); err != nil {
		return err
	}
	seen := make(map[int]bool, len(ds))
	for _, d := range ds {
		if seen[d.Message.N] {
			return fmt.Errorf("job %d delivered twice", d.Message.N)
		}
		seen[d.Message.N] = true
	}
	if c.OnlyFlow {
		return nil
	}
	for j := 1; j <= c.Messages; j++ {
		if !seen[j] {
			return fmt.Errorf("job %d lost", j)
		}
	}
	return nil
}

// waitFor polls cond until it holds, for a minute at most.
func waitFor(cond func() bool) error {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not true within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// DescribeLinks is Describe of each link, in order.
func DescribeLinks(links []*FaultLink[Job]) string {
	parts := make([]string, len(links))
	for i, l := range links {
		parts[i] = l.Describe()
	}
	return strings.Join(parts, " | ")
}

// linkRegion is an EntityRegion whose entities sit behind lossy links, one
// per entity, made on first use (from the sharding producer controller's
// goroutine).
type linkRegion struct {
	t          testing.TB
	sys        *runtime.System
	region     *runtime.Sharding[delivery.ConsumerCommand[Job]]
	toCC, toPC Faults
	seed       uint64
	mu         sync.Mutex
	links      map[string]*FaultLink[Job]
}

func (l *linkRegion) EntityRef(id string) runtime.Ref[delivery.ConsumerCommand[Job]] {
	l.mu.Lock()
	defer l.mu.Unlock()
	if link := l.links[id]; link != nil {
		return link.toCC
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	link := NewFaultLink[Job](l.t, l.sys, "link-"+id, nil, l.region.EntityRef(id), l.toCC, l.toPC, l.seed^h.Sum64())
	l.links[id] = link
	return link.toCC
}

func (l *linkRegion) describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	links := make([]*FaultLink[Job], 0, len(l.links))
	for _, link := range l.links {
		links = append(links, link)
	}
	return DescribeLinks(links)
}

// The random-loss acceptance test of the protocol spec: a producer and a
// consumer with random delays, a link that loses (and, in the extra cases,
// repeats and reorders) internal messages, a durable queue that fails at
// random; every case again with 1-byte chunks. Every seed's parameters come
// from a seeded RNG; a failing seed is named in the failure and runs alone
// with -delivery.seed.
var (
	FlagSeeds = flag.Int("delivery.seeds", 20, "seeds per random-loss case")
	flagSeed  = flag.Uint64("delivery.seed", 0, "run the random-loss cases with this seed only")
	flagScale = flag.Float64("delivery.timescale", 0.05,
		"scale of the random-loss tests' delays and timers against the spec's (resend 500ms..2s, delays 0-40ms)")
	FlagParallel = flag.Int("delivery.parallel", 8, "random-loss seeds run at once")
)
