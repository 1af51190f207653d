package eventsourced_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/eventsourced"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// benchTally is a small flat state; benchAdded its one event.
type benchTally struct{ Sum int }

type benchAdded struct{ N int }

var (
	benchTallies = eventsourced.Define("bench-tally", func(string) benchTally { return benchTally{} },
		func(t benchTally, e any) benchTally { t.Sum += e.(benchAdded).N; return t })
	benchAdd = eventsourced.Command(benchTallies, "add",
		func(ctx *eventsourced.Ctx[benchTally, int], t benchTally, n int) eventsourced.Effect[benchTally, int] {
			return ctx.Persist(benchAdded{N: n}).ThenReply(func(t benchTally) int { return t.Sum })
		})
	benchSum = eventsourced.Command(benchTallies, "sum",
		func(ctx *eventsourced.Ctx[benchTally, int], t benchTally, _ components.Done) eventsourced.Effect[benchTally, int] {
			return ctx.Reply(t.Sum)
		})
)

func init() { eventsourced.Event[benchAdded](benchTallies, "added") }

// benchWorkers is how many callers send commands at once; benchEntities
// how many entities they spread them over.
const benchWorkers, benchEntities = 64, 1000

// BenchmarkEventSourcedPersist: events persisted per second by one
// instance on Redis (RedisStore), one event per command over many
// entities, and, in the same run, a bare go-redis loop doing one
// XADD-plus-HSET script per event of the same size from as many
// goroutines. x-bare is the entity's rate over the bare loop's;
// cpu-us/event and bare-cpu-us/event are this process's CPU time per
// event of each (Redis's not counted), steadier than the rates on a
// machine loaded from elsewhere; allocs/event and bare-allocs/event its
// allocations per event of each.
func BenchmarkEventSourcedPersist(b *testing.B) {
	rdb := testenv.Redis(b)
	prefix := "bench-" + rand.Text()
	b.Cleanup(func() { testenv.DeleteKeys(b, rdb, prefix+":*") })
	client := benchStart(b, entities.NewRedisStore(rdb, prefix))
	ctx := context.Background()
	data, _ := json.Marshal(benchAdded{N: 1})

	esOp := func(i int) error {
		_, err := benchAdd.Invoke(ctx, client, "t-"+strconv.Itoa(i%benchEntities), 1)
		return err
	}
	bareOp := func(i int) error {
		tag := "{" + strconv.Itoa(i%benchEntities) + "}"
		return bareAppend.Run(ctx, rdb, []string{prefix + ":bare:" + tag + ":h", prefix + ":bare:" + tag + ":s"},
			"added", data, time.Now().UnixMilli()).Err()
	}
	// The two take turns, in halves, so that a change in the machine's
	// load during the run weighs on both.
	b.ResetTimer()
	var es, bare spreadResult
	for _, half := range []int{b.N / 2, b.N - b.N/2} {
		es = es.add(spread(half, esOp))
		bare = bare.add(spread(half, bareOp))
	}
	b.StopTimer()
	if es.err != nil || bare.err != nil {
		b.Fatalf("eventsourced: %v; bare: %v", es.err, bare.err)
	}
	esRate, bareRate := float64(b.N)/es.elapsed.Seconds(), float64(b.N)/bare.elapsed.Seconds()
	b.ReportMetric(esRate, "events/s")
	b.ReportMetric(bareRate, "bare-events/s")
	b.ReportMetric(esRate/bareRate, "x-bare")
	b.ReportMetric(float64(es.cpu.Microseconds())/float64(b.N), "cpu-us/event")
	b.ReportMetric(float64(bare.cpu.Microseconds())/float64(b.N), "bare-cpu-us/event")
	b.ReportMetric(float64(es.allocs)/float64(b.N), "allocs/event")
	b.ReportMetric(float64(bare.allocs)/float64(b.N), "bare-allocs/event")
}

// bareAppend is the bare loop's write: the next number in a hash, and
// the event in a stream under it.
var bareAppend = redis.NewScript(`
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('XADD', KEYS[2], seq .. '-0', 'n', ARGV[1], 'd', ARGV[2], 'a', ARGV[3])
return seq`)

type spreadResult struct {
	elapsed, cpu time.Duration // cpu: the process's
	allocs       uint64        // the process's
	err          error
}

// add is r and o together.
func (r spreadResult) add(o spreadResult) spreadResult {
	return spreadResult{elapsed: r.elapsed + o.elapsed, cpu: r.cpu + o.cpu, allocs: r.allocs + o.allocs, err: cmpOr(r.err, o.err)}
}

// spread runs do(0..n-1) from benchWorkers goroutines and times it, in
// wall-clock and in this process's CPU time, and counts its allocations.
func spread(n int, do func(i int) error) spreadResult {
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var mem goruntime.MemStats
	goruntime.ReadMemStats(&mem)
	allocs := mem.Mallocs
	start, cpu := time.Now(), testenv.ProcessCPU()
	var wg sync.WaitGroup
	for range benchWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), testenv.ProcessCPU()-cpu
	goruntime.ReadMemStats(&mem)
	return spreadResult{elapsed: elapsed, cpu: cpu, allocs: mem.Mallocs - allocs, err: first}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// BenchmarkEventSourcedLoad: loading an entity whose journal holds
// 100,000 events with a snapshot every 100, on Redis: each iteration
// starts a fresh instance (nothing in memory) and reads the entity once.
// p99-ms is the 99th percentile of one load, p50-ms its median.
func BenchmarkEventSourcedLoad(b *testing.B) {
	const events, every = 100_000, 100
	rdb := testenv.Redis(b)
	prefix := "bench-" + rand.Text()
	b.Cleanup(func() { testenv.DeleteKeys(b, rdb, prefix+":*") })
	store := entities.NewRedisStore(rdb, prefix)
	ctx := context.Background()
	data, _ := json.Marshal(benchAdded{N: 1})
	at := time.Now()
	for from := uint64(1); from <= events; from += every { // the journal as the entity writes it
		w := entities.JournalWrite{Expected: from - 1}
		for seq := from; seq < from+every; seq++ {
			w.Events = append(w.Events, entities.JournalEvent{Seq: seq, Name: "added", Data: data, At: at})
		}
		snap, _ := json.Marshal(benchTally{Sum: int(from + every - 1)})
		w.Snapshot = &entities.Snapshot{Seq: from + every - 1, Data: snap, At: at}
		if err := store.Append(ctx, entities.Fence{}, "bench-tally", "big", w); err != nil {
			b.Fatal(err)
		}
	}
	var times []time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		client := benchStart(b, store)
		// A fresh instance's start-up allocates about 400 KB (its
		// dispatchers' run queues): collected here, it does not make a GC
		// cycle of the harness's run during the load that is timed.
		goruntime.GC()
		b.StartTimer()
		start := time.Now()
		sum, err := benchSum.Invoke(ctx, client, "big", components.Done{})
		times = append(times, time.Since(start))
		if err != nil || sum != events {
			b.Fatalf("sum = %d, %v; want %d", sum, err, events)
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
}

// benchStart starts benchTallies on a runtime system of its own over
// store, stopped when b ends, and returns the client that reaches it.
func benchStart(b *testing.B, store entities.Store) *components.Client {
	sys := testenv.System(b, fmt.Sprintf("%s-%d", b.Name(), time.Now().UnixNano()))
	client := components.NewClient(components.NewRegistry())
	if _, err := benchTallies.Start(eventsourced.Host{System: sys, Client: client, Store: store}); err != nil {
		b.Fatal(err)
	}
	return client
}
