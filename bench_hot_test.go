package trellis_test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
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
// whether a side was bound by the processors or by waiting. In the same
// run, the bare baseline does the same on one and on three instances of a
// bare chi + go-redis handler that forwards through a reverse proxy
// (bare-x-one): what a forward costs on these cores with nothing of
// Trellis's.
//
//	go test -run '^$' -bench ClusterHotCounters -benchtime 1x .
func BenchmarkClusterHotCounters(b *testing.B) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []trellistest.Option{trellistest.WithLogger(logger), trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo })}
	oneSvc := trellistest.StartInstances(b, 1, (&fixture.CounterApp{}).Setup, opts...)
	threeSvc := trellistest.StartInstances(b, 3, (&fixture.CounterApp{}).Setup, opts...)
	trellistest.WaitSettled(b, oneSvc...)
	trellistest.WaitSettled(b, threeSvc...)
	url := trellistest.RedisURL(b)
	// one, three, and the bare baseline's one and three.
	sides := [4][]hotNode{hotNodes(oneSvc), hotNodes(threeSvc), startBareCluster(b, url, 1), startBareCluster(b, url, 3)}

	client := newLoadClient()
	b.Cleanup(client.Close)
	for _, c := range sides { // warm up
		if _, err := hotLoad(client, c, hotWorkers*8); err != nil {
			b.Fatal(err)
		}
	}
	var res [4]hotResult
	for b.Loop() {
		for turn := range hotTurns {
			order := []int{0, 1, 2, 3}
			if turn%2 == 1 {
				order = []int{3, 2, 1, 0}
			}
			for _, i := range order {
				r, err := hotLoad(client, sides[i], hotRequests)
				if err != nil {
					b.Fatal(err)
				}
				res[i].merge(r)
			}
		}
	}
	oneRes, threeRes, bareOne, bareThree := res[0], res[1], res[2], res[3]
	b.ReportMetric(oneRes.rps(), "one-req/s")
	b.ReportMetric(threeRes.rps(), "three-req/s")
	b.ReportMetric(threeRes.rps()/oneRes.rps(), "x-one")
	b.ReportMetric(bareThree.rps()/bareOne.rps(), "bare-x-one")
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
	b.Logf("the bare baseline (chi + go-redis, a reverse proxy to the owner): one %.0f req/s (%.1f CPU-µs per request, %.2f cores); "+
		"three %.0f req/s (%.1f CPU-µs per request, %.2f cores): %.2fx",
		bareOne.rps(), bareOne.cpuPerReq(), bareOne.cores(), bareThree.rps(), bareThree.cpuPerReq(), bareThree.cores(),
		bareThree.rps()/bareOne.rps())
}

// hotNode is an instance that hot-counter runs send to: its base URL,
// and whether it owns a counter (a request for another is forwarded).
type hotNode struct {
	url    string
	serves func(id string) bool
}

// hotNodes are the instances of a Trellis cluster.
func hotNodes(c []*trellistest.Service) []hotNode {
	nodes := make([]hotNode, len(c))
	for i, s := range c {
		nodes[i] = hotNode{url: s.URL, serves: func(id string) bool { return s.Serves("counter", id) }}
	}
	return nodes
}

// startBareCluster serves the bare handler of startBare on n instances,
// each counter owned by one of them (FNV-1a of its id, modulo n): an
// instance handles its own counters and hands the others to their owner
// through net/http/httputil's reverse proxy (HTTP/1.1 keep-alive
// connections): what forwarding costs with nothing of Trellis's.
func startBareCluster(b *testing.B, url string, n int) []hotNode {
	owner := func(id string) int {
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		return int(h.Sum32() % uint32(n))
	}
	proxies := make([]*httputil.ReverseProxy, n) // set once all listen, before any request
	nodes := make([]hotNode, n)
	for i := range n {
		forward := func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/counters/"), "/")
				if o := owner(id); o != i {
					proxies[o].ServeHTTP(w, r)
					return
				}
				h.ServeHTTP(w, r)
			})
		}
		nodes[i] = hotNode{url: startBareWith(b, url, forward), serves: func(id string) bool { return owner(id) == i }}
	}
	transport := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64}
	b.Cleanup(transport.CloseIdleConnections)
	for i, node := range nodes {
		target, err := neturl.Parse(node.url)
		if err != nil {
			b.Fatal(err)
		}
		proxies[i] = httputil.NewSingleHostReverseProxy(target)
		proxies[i].Transport = transport
	}
	return nodes
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
func hotLoad(client *loadClient, cluster []hotNode, n int) (hotResult, error) {
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
				owner := ts.serves(id)
				t0 := time.Now()
				if err := client.do(w, http.MethodPost, ts.url+"/counters/"+id+"/increase", `{"by":1}`); err != nil {
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

// BenchmarkHotEntity sends increases of one counter from hotEntityClients
// clients to one instance, against the bare handler's HINCRBY of one key
// in the same run, taking turns: what one entity serves when many callers
// write it at once (its commands run in order; those that queued behind a
// write go together in the next).
//
//	go test -run '^$' -bench HotEntity -benchtime 1x .
func BenchmarkHotEntity(b *testing.B) {
	const hotEntityClients, perTurn = 64, 6400
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	url := trellistest.RedisURL(b)
	svc := trellistest.StartInstances(b, 1, (&fixture.CounterApp{}).Setup, trellistest.WithRedisURL(url),
		trellistest.WithLogger(logger), trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo }))
	trellistest.WaitSettled(b, svc...)
	bases := [2]string{svc[0].URL, startBare(b, url)}
	client := newLoadClient()
	b.Cleanup(client.Close)
	load := func(base string, n int) (time.Duration, error) {
		errs := make([]error, hotEntityClients)
		var wg sync.WaitGroup
		start := time.Now()
		for w := range hotEntityClients {
			wg.Go(func() {
				for range n / hotEntityClients {
					if errs[w] = client.do(w, http.MethodPost, base+"/counters/hot/increase", `{"by":1}`); errs[w] != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start), errors.Join(errs...)
	}
	var took [2]time.Duration
	for i, base := range bases { // warm up
		if _, err := load(base, hotEntityClients*4); err != nil {
			b.Fatalf("side %d: %v", i, err)
		}
	}
	turn := 0
	for b.Loop() {
		for range hotTurns {
			for _, i := range []int{turn % 2, 1 - turn%2} {
				d, err := load(bases[i], perTurn)
				if err != nil {
					b.Fatal(err)
				}
				took[i] += d
			}
			turn++
		}
	}
	n := float64(b.N * hotTurns * perTurn)
	stack, bare := n/took[0].Seconds(), n/took[1].Seconds()
	b.ReportMetric(stack, "stack-req/s")
	b.ReportMetric(bare, "bare-req/s")
	b.ReportMetric(stack/bare, "x-bare")
	b.Logf("%d clients on one counter: the stack %.0f req/s, the bare handler %.0f req/s: %.2fx",
		hotEntityClients, stack, bare, stack/bare)
}
