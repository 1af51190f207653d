package trellis_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// The HTTP benchmark drives the same concurrent loopback load at two
// servers in the same run: the whole Trellis stack (middleware, generated
// router, Decode, component client, entity actor, Redis store with its
// compare-and-set script) and a bare chi + go-redis handler doing the same
// write (HINCRBY) and read (HGET). It reports requests/s and p99 latency of
// both and their ratios (stack ÷ bare throughput, stack ÷ bare p99), and
// the process's CPU time per request on each side (the clients' share is
// the same on both, so the difference is what the stack costs): a figure
// that load from elsewhere on the machine disturbs far less than a rate.
//
// The two servers take turns in short slices, the first of each pair
// alternating, so that a burst of load from elsewhere on the machine
// falls on both rather than on whichever ran during it.

const (
	benchWorkers    = 32   // concurrent clients, each on its own counter id
	benchRoundTrips = 5000 // POST increase + GET per server per iteration
	benchSlices     = 10   // turns per server per iteration
)

// BenchmarkHTTPEntityRoundTrip: POST /counters/{id}/increase then GET
// /counters/{id}, through the whole stack on Redis, against the bare
// handler: an instance alone on the store (cluster off: every read checks
// the stored revision), and an instance that is a cluster of one (the owner of every
// entity: reads from memory, writes fenced).
func BenchmarkHTTPEntityRoundTrip(b *testing.B) { benchStacks(b, false) }

// BenchmarkHTTPEntityGet: GET /counters/{id} only, as above: what serving
// reads from memory is worth against the bare handler's Redis GET.
func BenchmarkHTTPEntityGet(b *testing.B) { benchStacks(b, true) }

// benchStacks measures an instance alone and a cluster of one against the
// bare handler.
func benchStacks(b *testing.B, readOnly bool) {
	url := trellistest.RedisURL(b)
	// The stack logs its access lines as in production (JSON at info), into
	// io.Discard, so that their cost is counted.
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []trellistest.Option{trellistest.WithRedisURL(url), trellistest.WithLogger(logger),
		trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo })}
	b.Run("alone", func(b *testing.B) {
		alone := trellistest.WithConfig(func(c *trellis.Config) { c.ClusterAddr = trellis.ClusterOff })
		benchRoundTrip(b, url, trellistest.Start(b, (&fixture.CounterApp{}).Setup, append(opts, alone)...), readOnly)
	})
	b.Run("cluster", func(b *testing.B) {
		stack := trellistest.StartInstances(b, 1, (&fixture.CounterApp{}).Setup, opts...)[0]
		trellistest.WaitSettled(b, stack)
		benchRoundTrip(b, url, stack, readOnly)
	})
}

// benchRoundTrip measures stack against the bare handler, taking turns.
func benchRoundTrip(b *testing.B, url string, stack *trellistest.Service, readOnly bool) {
	bareURL := startBare(b, url)

	client := newLoadClient()
	b.Cleanup(client.Close)
	// Warm up: connections, entity activation, script loading.
	for _, base := range []string{bareURL, stack.URL} {
		if _, err := runLoad(client, base, benchWorkers*4, false); err != nil {
			b.Fatal(err)
		}
	}

	bareRes, stackRes := takeTurns(b, client, [2]string{bareURL, stack.URL}, readOnly)
	stackRPS, bareRPS := stackRes.rps(), bareRes.rps()
	stackP99, bareP99 := stackRes.p99(), bareRes.p99()
	b.ReportMetric(stackRPS, "stack-req/s")
	b.ReportMetric(bareRPS, "bare-req/s")
	b.ReportMetric(stackP99.Seconds()*1000, "stack-p99-ms")
	b.ReportMetric(bareP99.Seconds()*1000, "bare-p99-ms")
	b.ReportMetric(stackRPS/bareRPS, "x-bare")
	b.ReportMetric(stackP99.Seconds()/bareP99.Seconds(), "p99-x-bare")
	b.ReportMetric(stackRes.cpuPerReq(), "stack-cpu-us/req")
	b.ReportMetric(bareRes.cpuPerReq(), "bare-cpu-us/req")
	b.Logf("%d workers, %d round trips (POST+GET) per server: stack %.0f req/s p99 %v %.1f CPU-µs/req; "+
		"bare %.0f req/s p99 %v %.1f CPU-µs/req; throughput ratio %.2fx, p99 ratio %.2fx",
		benchWorkers, len(stackRes.latencies)/2, stackRPS, stackP99, stackRes.cpuPerReq(),
		bareRPS, bareP99, bareRes.cpuPerReq(), stackRPS/bareRPS, stackP99.Seconds()/bareP99.Seconds())
}

// takeTurns loads the two servers at bases in turns, benchSlices short
// slices each per iteration, the first of each pair alternating, and
// returns what each measured.
func takeTurns(b *testing.B, client *loadClient, bases [2]string, readOnly bool) (first, second loadResult) {
	r := takePairTurns(b, client, readOnly, bases)
	return r[0][0], r[0][1]
}

// takePairTurns is takeTurns for several pairs of servers in one run: in
// each iteration, each pair takes its turns in order.
func takePairTurns(b *testing.B, client *loadClient, readOnly bool, pairs ...[2]string) [][2]loadResult {
	res := make([][2]loadResult, len(pairs))
	turn := 0
	for b.Loop() {
		for p, bases := range pairs {
			for range benchSlices {
				order, results := bases, [2]*loadResult{&res[p][0], &res[p][1]}
				if turn%2 == 1 {
					order[0], order[1], results[0], results[1] = order[1], order[0], results[1], results[0]
				}
				turn++
				for i, base := range order {
					r, err := runLoad(client, base, benchRoundTrips/benchSlices, readOnly)
					if err != nil {
						b.Fatal(err)
					}
					results[i].merge(r)
				}
			}
		}
	}
	return res
}

// loadResult is what one load run measured.
type loadResult struct {
	elapsed   time.Duration
	cpu       time.Duration   // the process's CPU time (user + system), clients and servers
	latencies []time.Duration // one per request
}

func (r *loadResult) merge(o loadResult) {
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.latencies = append(r.latencies, o.latencies...)
}

func (r *loadResult) rps() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }

func (r *loadResult) cpuPerReq() float64 {
	return float64(r.cpu.Microseconds()) / float64(max(len(r.latencies), 1))
}

func (r *loadResult) p99() time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// runLoad sends roundTrips POST increase + GET pairs to base from
// benchWorkers clients, client w on counter "bench-w", or, with
// readOnly, pairs of GETs.
func runLoad(client *loadClient, base string, roundTrips int, readOnly bool) (loadResult, error) {
	per := (roundTrips + benchWorkers - 1) / benchWorkers
	lat := make([][]time.Duration, benchWorkers)
	errs := make(chan error, benchWorkers)
	var wg sync.WaitGroup
	start, cpu := time.Now(), testenv.ProcessCPU()
	for w := range benchWorkers {
		wg.Go(func() {
			post := base + "/counters/bench-" + strconv.Itoa(w) + "/increase"
			get := base + "/counters/bench-" + strconv.Itoa(w)
			l := make([]time.Duration, 0, 2*per)
			for range per {
				t0 := time.Now()
				if readOnly {
					err := client.do(w, http.MethodGet, get, "")
					t1 := time.Now()
					if err == nil {
						err = client.do(w, http.MethodGet, get, "")
					}
					if err != nil {
						errs <- err
						return
					}
					l = append(l, t1.Sub(t0), time.Since(t1))
					continue
				}
				if err := client.do(w, http.MethodPost, post, `{"by":1}`); err != nil {
					errs <- err
					return
				}
				t1 := time.Now()
				if err := client.do(w, http.MethodGet, get, ""); err != nil {
					errs <- err
					return
				}
				l = append(l, t1.Sub(t0), time.Since(t1))
			}
			lat[w] = l
		})
	}
	wg.Wait()
	res := loadResult{elapsed: time.Since(start), cpu: testenv.ProcessCPU() - cpu}
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	for _, l := range lat {
		res.latencies = append(res.latencies, l...)
	}
	return res, nil
}

// startBare serves the bare baseline on a loopback port: chi and go-redis
// only, a hash per counter, HINCRBY to increase and HGET to read, with the
// same JSON in and out (and the same range check) as the stack.
func startBare(b *testing.B, url string) string { return startBareWith(b, url, nil) }

// startBareWith is startBare with wrap (when not nil) around the router:
// a baseline's own middleware.
func startBareWith(b *testing.B, url string, wrap func(http.Handler) http.Handler) string {
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	prefix := "trellis-bench-bare-" + rand.Text() + ":"
	reply := func(w http.ResponseWriter, id string, v int64) {
		body, _ := json.Marshal(struct {
			ID    string `json:"id"`
			Value int64  `json:"value"`
		}{id, v})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
	r := chi.NewRouter()
	r.Post("/counters/{id}/increase", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			By int64 `json:"by"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || in.By < 1 || in.By > 1_000_000 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		id := chi.URLParam(r, "id")
		v, err := rdb.HIncrBy(r.Context(), prefix+id, "value", in.By).Result()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		reply(w, id, v)
	})
	r.Get("/counters/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		v, err := rdb.HGet(r.Context(), prefix+id, "value").Int64()
		if err != nil && err != redis.Nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		reply(w, id, v)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var h http.Handler = r
	if wrap != nil {
		h = wrap(r)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if keys, err := rdb.Keys(ctx, prefix+"*").Result(); err == nil && len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
		_ = rdb.Close()
	})
	return "http://" + ln.Addr().String()
}
