package delivery

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/runtime"
)

// The random-loss acceptance test of the protocol spec: a producer and a
// consumer with random delays, a link that loses (and, in the extra cases,
// repeats and reorders) internal messages, a durable queue that fails at
// random; every case again with 1-byte chunks. Every seed's parameters come
// from a seeded RNG; a failing seed is named in the failure and runs alone
// with -delivery.seed.
var (
	flagSeeds = flag.Int("delivery.seeds", 20, "seeds per random-loss case")
	flagSeed  = flag.Uint64("delivery.seed", 0, "run the random-loss cases with this seed only")
	flagScale = flag.Float64("delivery.timescale", 0.05,
		"scale of the random-loss tests' delays and timers against the spec's (resend 500ms..2s, delays 0-40ms)")
	flagParallel = flag.Int("delivery.parallel", 8, "random-loss seeds run at once")
)

// lossCase is one row of the acceptance test's table.
type lossCase struct {
	name     string
	messages int              // jobs that must arrive
	toCC     [2]float64       // range of the drop probability of SequencedMessage
	toPC     [2]float64       // range of the drop probability of Request, Resend, Ack, RegisterConsumer
	queue    [2]float64       // range of the durable queue's failure probability; zero: no queue
	onlyFlow bool             // OnlyFlowControl: lost messages stay lost
	chunk    int              // ChunkLargeMessages; 0: no chunking
	dup      float64          // probability that the link repeats a message, each way
	reorder  float64          // probability that the link delays a message, so others overtake it
	delays   bool             // producer and consumer wait 0-40ms (scaled) per message
	window   int              // flow control window; 0: 20, as in the spec
	churn    bool             // work pulling only: a worker leaves, and another joins, mid-stream
	lag      time.Duration    // the link holds every message back up to this, keeping order
	resend   [2]time.Duration // ResendIntervalMin and Max, unscaled; zero: the spec's, scaled
}

func lossCases() []lossCase {
	base := []lossCase{
		{name: "flaky network", messages: 63, toCC: [2]float64{0.1, 0.3}, toPC: [2]float64{0.1, 0.3}, delays: true},
		{name: "flaky durable queue", messages: 31, queue: [2]float64{0.1, 0.2}, delays: true},
		{name: "flaky network and durable queue", messages: 17, toCC: [2]float64{0.1, 0.2}, toPC: [2]float64{0.1, 0.2}, queue: [2]float64{0.1, 0.2}, delays: true},
		{name: "without resending", messages: 63, toCC: [2]float64{0.1, 0.5}, toPC: [2]float64{0.1, 0.4}, onlyFlow: true, delays: true},
		// Beyond the spec: a network that also repeats and reorders.
		{name: "duplicating reordering network", messages: 63, toCC: [2]float64{0.05, 0.2}, toPC: [2]float64{0.05, 0.2}, dup: 0.1, reorder: 0.1, delays: true},
		{name: "duplicating reordering network, durable queue", messages: 31, toCC: [2]float64{0.05, 0.2}, toPC: [2]float64{0.05, 0.2}, queue: [2]float64{0.1, 0.2}, dup: 0.1, reorder: 0.1, delays: true},
	}
	var out []lossCase
	for _, c := range base {
		out = append(out, c)
		c.name += ", 1-byte chunks"
		c.chunk = 1
		out = append(out, c)
	}
	return out
}

func TestRandomLoss(t *testing.T) {
	for _, c := range lossCases() {
		t.Run(c.name, func(t *testing.T) { runLossCase(t, c, runLossSeed) })
	}
}

// flowOnlyChunkCases are flow control only with every message in 3 to 4
// chunks, at the smallest windows, through a slow link that keeps order
// and loses and repeats messages each way: a chunk lost in the middle or at
// the end of a message must neither stop the stream nor hold it for long.
func flowOnlyChunkCases() []lossCase {
	var out []lossCase
	for _, w := range []int{2, 3, 4} {
		out = append(out, lossCase{name: fmt.Sprintf("window %d, 3-byte chunks", w), messages: 100,
			toCC: [2]float64{0.05, 0.2}, toPC: [2]float64{0.1, 0.25}, dup: 0.1, lag: 2 * time.Millisecond,
			onlyFlow: true, chunk: 3, window: w, resend: [2]time.Duration{2 * time.Millisecond, 40 * time.Millisecond}})
	}
	return out
}

func TestRandomLossFlowOnlyChunks(t *testing.T) {
	for _, c := range flowOnlyChunkCases() {
		t.Run(c.name, func(t *testing.T) { runLossCase(t, c, runLossSeed) })
	}
}

// TestRandomLossLong sends 10,000 messages through a lossy, repeating,
// reordering link, without delays, window 50.
func TestRandomLossLong(t *testing.T) {
	cases := []lossCase{
		{name: "10000 messages", messages: 10000, toCC: [2]float64{0.01, 0.05}, toPC: [2]float64{0.01, 0.05}, dup: 0.01, reorder: 0.01, window: 50},
		{name: "10000 messages, without resending", messages: 10000, toCC: [2]float64{0.01, 0.05}, toPC: [2]float64{0.01, 0.05}, dup: 0.01, reorder: 0.01, window: 50, onlyFlow: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runLossCase(t, c, runLossSeed) })
	}
}

// runLossCase runs c with every seed, several at a time, and reports each
// failing seed. run runs one seed: point to point, work pulling or
// sharding.
func runLossCase(t *testing.T, c lossCase, run func(c lossCase, seed uint64) error) {
	seeds := make([]uint64, 0, *flagSeeds)
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		base := uint64(time.Now().UnixNano())
		for i := range *flagSeeds {
			seeds = append(seeds, base+uint64(i)*0x9e3779b97f4a7c15)
		}
	}
	t.Logf("seeds %d..: re-run one with -delivery.seed=SEED", seeds[0])
	test, _, _ := strings.Cut(t.Name(), "/")
	sem := make(chan struct{}, max(1, *flagParallel))
	var wg sync.WaitGroup
	for _, seed := range seeds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := run(c, seed); err != nil {
				t.Errorf("seed %d: %v\n\tre-run: go test ./delivery -run '^%s$/^%s$' -delivery.seed=%d",
					seed, err, test, regexpName(c.name), seed)
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

// lossRun is what one seed of a case sets up, whatever the pattern: the
// parameters drawn from the seed, an actor system of its own, and the
// settings of the controllers.
type lossRun struct {
	c                                        lossCase
	seed                                     uint64
	rng                                      *rand.Rand // for the pattern's own draws, after the common ones
	pToCC, pToPC, pQueue                     float64
	consumerDelay, producerDelay, queueDelay time.Duration
	sys                                      *runtime.System
	logs                                     *logBuffer
	rt                                       *seedT // the testing.TB of the helpers
	cs                                       ConsumerSettings
	ps                                       ProducerSettings
}

func newLossRun(c lossCase, seed uint64) *lossRun {
	r := &lossRun{c: c, seed: seed, rng: rand.New(rand.NewPCG(seed, 0)), rt: &seedT{}}
	between := func(b [2]float64) float64 { return b[0] + r.rng.Float64()*(b[1]-b[0]) }
	r.pToCC, r.pToPC, r.pQueue = between(c.toCC), between(c.toPC), between(c.queue)
	if c.delays {
		r.consumerDelay = scaled(time.Duration(r.rng.IntN(40)) * time.Millisecond)
		r.producerDelay = scaled(time.Duration(r.rng.IntN(40)) * time.Millisecond)
		r.queueDelay = scaled(time.Duration(r.rng.IntN(40)) * time.Millisecond)
	}
	// A test's t is not usable from these goroutines for cleanup; the
	// system is shut down by close, and its log kept for the failure report.
	r.logs = &logBuffer{}
	var w io.Writer = r.logs
	r.sys = runtime.NewSystem(fmt.Sprintf("loss-%d", seed), runtime.WithLogger(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lossLogLevel}))))
	window := c.window
	if window == 0 {
		window = 20
	}
	r.cs = ConsumerSettings{
		FlowControlWindow: window,
		ResendIntervalMin: scaled(500 * time.Millisecond),
		ResendIntervalMax: scaled(2 * time.Second),
		OnlyFlowControl:   c.onlyFlow,
	}
	if c.resend[0] > 0 {
		r.cs.ResendIntervalMin, r.cs.ResendIntervalMax = c.resend[0], c.resend[1]
	}
	r.ps = ProducerSettings{
		ChunkLargeMessages:         c.chunk,
		ResendFirstInterval:        scaled(time.Second),
		DurableQueueRequestTimeout: scaled(3 * time.Second),
		DurableQueueRetryBackoff:   scaled(100 * time.Millisecond),
	}
	return r
}

// close shuts the system down; err is the seed's outcome so far.
func (r *lossRun) close(err *error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if serr := r.sys.Shutdown(ctx); serr != nil && *err == nil {
		*err = serr
	}
}

func (r *lossRun) params() string {
	return fmt.Sprintf("drop to cc %.2f, to pc %.2f, queue failure %.2f, delays consumer %v producer %v queue %v",
		r.pToCC, r.pToPC, r.pQueue, r.consumerDelay, r.producerDelay, r.queueDelay)
}

// queueOpts are the producer options of the case's durable queue: a flaky
// one in memory, or none.
func (r *lossRun) queueOpts() []ProducerOption[job] {
	if r.c.queue[1] == 0 {
		return nil
	}
	return []ProducerOption[job]{WithDurableQueue[job](newFlakyQueue[job](durable.NewMemory[job](), r.pQueue, r.queueDelay, r.seed))}
}

// faults are what a link does each way, from the case and the draws.
func (r *lossRun) faults() (toCC, toPC faults) {
	maxDelay := scaled(100 * time.Millisecond)
	return faults{drop: r.pToCC, dup: r.c.dup, delay: r.c.reorder, maxDelay: maxDelay, lag: r.c.lag},
		faults{drop: r.pToPC, dup: r.c.dup, delay: r.c.reorder, maxDelay: maxDelay, lag: r.c.lag}
}

// consumerSpec and producerDelay are the drawn delays of consumer and
// producer, if any.
func (r *lossRun) consumerSpec() consumerSpec {
	if d := r.consumerDelay; d > 0 {
		return consumerSpec{delay: func() time.Duration { return d }}
	}
	return consumerSpec{}
}

func (r *lossRun) producerDelayFunc() func() time.Duration {
	if d := r.producerDelay; d > 0 {
		return func() time.Duration { return d }
	}
	return nil
}

// wait waits for col, a minute at most; what is wrong is an error.
func (r *lossRun) wait(col *collector, describe func() string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := col.wait(ctx); err != nil {
		return fmt.Errorf("%s: %w\n\tlinks: %s\n\tlog tail:\n%s", r.params(), err, describe(), r.logs.tail(20))
	}
	if r.rt.failed() {
		return fmt.Errorf("%s: %s", r.params(), r.rt.errors())
	}
	return nil
}

// runLossSeed runs one case of point to point with one seed.
func runLossSeed(c lossCase, seed uint64) (err error) {
	r := newLossRun(c, seed)
	defer r.close(&err)
	pc, err := SpawnProducerController[job](r.sys, "pc", "p-"+fmt.Sprint(seed), r.ps, r.queueOpts()...)
	if err != nil {
		return err
	}
	cc, err := SpawnConsumerController[job](r.sys, "cc", r.cs)
	if err != nil {
		return err
	}
	toCC, toPC := r.faults()
	link := newFaultLink[job](r.rt, r.sys, "link", pc, cc, toCC, toPC, seed)
	col := newCollector(c.messages)
	spawnConsumer(r.rt, r.sys, "consumer", cc, r.consumerSpec(), col)
	spawnProducer(r.rt, r.sys, "producer", pc, producerSpec{delay: r.producerDelayFunc()})
	cc.Tell(RegisterToProducerController[job]{ProducerController: link.toPC})

	if err := r.wait(col, link.describe); err != nil {
		return err
	}
	params := r.params()
	got := col.jobs()
	if c.onlyFlow {
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				return fmt.Errorf("%s: job %d after job %d: not strictly increasing (around: %v)", params, got[i], got[i-1], got[max(0, i-5):min(len(got), i+5)])
			}
		}
		return nil
	}
	for i := range c.messages {
		if i >= len(got) || got[i] != i+1 {
			return fmt.Errorf("%s: delivery %d is not job %d: %v\n\tlink: %s", params, i, i+1, got[max(0, i-5):min(len(got), i+5)], link.describe())
		}
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
func (s *seedT) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errs) > 0
}
func (s *seedT) errors() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.errs)
}

func (l *faultLink[A]) describe() string {
	st := func(s *linkStats) string {
		return fmt.Sprintf("passed %d dropped %d duplicated %d delayed %d", s.passed.Load(), s.dropped.Load(), s.duplicated.Load(), s.delayed.Load())
	}
	return "to cc: " + st(&l.toCCStats) + "; to pc: " + st(&l.toPCStats)
}
