package trellis_test

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/fixture"
	"github.com/trellis-go/trellis/internal/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// Hot counters: hotWorkers clients increase hotCounters counters, each
// request to a random instance.
const (
	hotWorkers  = 16
	hotCounters = 4
	hotRequests = 3000 // per turn and cluster
	hotTurns    = 4    // turns per cluster per iteration
)

// BenchmarkClusterHotCounters sends increases of a few hot counters to a
// cluster of three instances (each request to a random one) and to one
// instance alone, taking turns in the same run, all on one Redis and this
// machine's cores. It reports the three's throughput against the one's;
// the cost of a forward: the latency of the requests that reached the
// counter's owner against those the receiving instance forwarded; and the
// process's CPU per request and cores kept busy on each side, which say
// whether a side was bound by the processors or by waiting.
//
//	go test -run '^$' -bench ClusterHotCounters -benchtime 1x .
func BenchmarkClusterHotCounters(b *testing.B) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []trellistest.Option{trellistest.WithLogger(logger), trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo })}
	one := trellistest.StartInstances(b, 1, (&fixture.CounterApp{}).Setup, opts...)
	three := trellistest.StartInstances(b, 3, (&fixture.CounterApp{}).Setup, opts...)
	trellistest.WaitSettled(b, one...)
	trellistest.WaitSettled(b, three...)

	client := newLoadClient()
	b.Cleanup(client.Close)
	for _, c := range [][]*trellistest.Service{one, three} { // warm up
		if _, err := hotLoad(client, c, hotWorkers*8); err != nil {
			b.Fatal(err)
		}
	}
	var oneRes, threeRes hotResult
	for b.Loop() {
		for turn := range hotTurns {
			order := []*hotResult{&oneRes, &threeRes}
			clusters := [][]*trellistest.Service{one, three}
			if turn%2 == 1 {
				slices.Reverse(order)
				slices.Reverse(clusters)
			}
			for i, c := range clusters {
				r, err := hotLoad(client, c, hotRequests)
				if err != nil {
					b.Fatal(err)
				}
				order[i].merge(r)
			}
		}
	}
	b.ReportMetric(oneRes.rps(), "one-req/s")
	b.ReportMetric(threeRes.rps(), "three-req/s")
	b.ReportMetric(threeRes.rps()/oneRes.rps(), "x-one")
	b.ReportMetric(ms(quantile(threeRes.all(), 0.99)), "three-p99-ms")
	b.ReportMetric(ms(quantile(oneRes.all(), 0.99)), "one-p99-ms")
	b.ReportMetric(ms(quantile(threeRes.local, 0.5)), "local-p50-ms")
	b.ReportMetric(ms(quantile(threeRes.forwarded, 0.5)), "forwarded-p50-ms")
	b.ReportMetric(ms(quantile(threeRes.forwarded, 0.99)), "forwarded-p99-ms")
	b.ReportMetric(oneRes.cpuPerReq(), "one-cpu-us/req")
	b.ReportMetric(threeRes.cpuPerReq(), "three-cpu-us/req")
	b.ReportMetric(oneRes.cores(), "one-cores")
	b.ReportMetric(threeRes.cores(), "three-cores")
	b.Logf("%d clients, %d counters: one instance %.0f req/s (p50 %v, p99 %v); three %.0f req/s (p50 %v, p99 %v): %.2fx; "+
		"of the three's, %d reached the owner (p50 %v, p99 %v), %d were forwarded (p50 %v, p99 %v)",
		hotWorkers, hotCounters, oneRes.rps(), quantile(oneRes.all(), 0.5), quantile(oneRes.all(), 0.99),
		threeRes.rps(), quantile(threeRes.all(), 0.5), quantile(threeRes.all(), 0.99), threeRes.rps()/oneRes.rps(),
		len(threeRes.local), quantile(threeRes.local, 0.5), quantile(threeRes.local, 0.99),
		len(threeRes.forwarded), quantile(threeRes.forwarded, 0.5), quantile(threeRes.forwarded, 0.99))
	b.Logf("the process's CPU: one instance %.1f µs per request, %.2f cores busy; three %.1f µs per request, %.2f cores busy",
		oneRes.cpuPerReq(), oneRes.cores(), threeRes.cpuPerReq(), threeRes.cores())
}

// hotResult is what hot-counter runs measured: the latencies of the
// requests that reached the counter's owner and of those forwarded.
type hotResult struct {
	elapsed          time.Duration
	cpu              time.Duration // the process's CPU time: clients and instances
	local, forwarded []time.Duration
}

func (r *hotResult) merge(o hotResult) {
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.local = append(r.local, o.local...)
	r.forwarded = append(r.forwarded, o.forwarded...)
}

func (r *hotResult) all() []time.Duration { return slices.Concat(r.local, r.forwarded) }

func (r *hotResult) rps() float64 {
	return float64(len(r.local)+len(r.forwarded)) / r.elapsed.Seconds()
}

// cpuPerReq is the process's CPU time per request, in µs.
func (r *hotResult) cpuPerReq() float64 {
	return float64(r.cpu.Microseconds()) / float64(max(len(r.local)+len(r.forwarded), 1))
}

// cores is how many of the machine's cores the process kept busy on
// average: whether the run was bound by processors or by waiting.
func (r *hotResult) cores() float64 { return r.cpu.Seconds() / r.elapsed.Seconds() }

// hotLoad sends n increases from hotWorkers clients, each to a random
// counter on a random instance of cluster.
func hotLoad(client *loadClient, cluster []*trellistest.Service, n int) (hotResult, error) {
	per := n / hotWorkers
	results := make([]hotResult, hotWorkers)
	errs := make([]error, hotWorkers)
	var wg sync.WaitGroup
	start, cpu := time.Now(), testenv.ProcessCPU()
	for w := range hotWorkers {
		wg.Go(func() {
			r := &results[w]
			for range per {
				ts := cluster[rand.IntN(len(cluster))]
				id := fmt.Sprintf("hot-%d", rand.IntN(hotCounters))
				owner := ts.Serves("counter", id)
				t0 := time.Now()
				if err := client.do(w, http.MethodPost, ts.URL+"/counters/"+id+"/increase", `{"by":1}`); err != nil {
					errs[w] = err
					return
				}
				if owner {
					r.local = append(r.local, time.Since(t0))
				} else {
					r.forwarded = append(r.forwarded, time.Since(t0))
				}
			}
		})
	}
	wg.Wait()
	var out hotResult
	for _, r := range results {
		out.merge(r)
	}
	out.elapsed, out.cpu = time.Since(start), testenv.ProcessCPU()-cpu
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// quantile is the q-quantile of d (0 when d is empty).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }
