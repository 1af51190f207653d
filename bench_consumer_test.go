package trellis_test

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

// BenchmarkConsumerHTTPEntityRoundTrip drives the HTTP entity round trip
// (POST increase + GET, 32 keep-alive clients) at two clusters of one
// instance on one Redis, alternating in the same run: one with a consumer
// of the counters, one with none. It reports the ratio of their rates,
// the lag from a change's commit to its handler (p50, p99), and the
// Redis memory a change takes in the log. Needs a Redis
// (TRELLIS_TEST_REDIS_URL):
//
//	go test -run '^$' -bench ConsumerHTTPEntityRoundTrip -benchtime 10x .
func BenchmarkConsumerHTTPEntityRoundTrip(b *testing.B) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []trellistest.Option{trellistest.WithLogger(logger),
		trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo })}
	none := trellistest.StartInstances(b, 1, (&fixture.CounterApp{}).Setup, opts...)[0]
	var lags lagRecorder
	with := trellistest.StartInstances(b, 1, func(h *trellis.Host, r chi.Router) error {
		if err := (&fixture.CounterApp{}).Setup(h, r); err != nil {
			return err
		}
		_, err := consumers.Define("bench", counter.Entity, lags.handle).Start(h.Consumers())
		return err
	}, opts...)[0]
	trellistest.WaitSettled(b, none)
	trellistest.WaitSettled(b, with)

	client := newLoadClient()
	b.Cleanup(client.Close)
	for _, base := range []string{none.URL, with.URL} {
		if _, err := runLoad(client, base, benchWorkers*4, false); err != nil {
			b.Fatal(err)
		}
	}
	lags.reset()
	var noneRes, withRes loadResult
	turn := 0
	for b.Loop() {
		bases, results := [2]string{none.URL, with.URL}, [2]*loadResult{&noneRes, &withRes}
		if turn%2 == 1 {
			bases[0], bases[1], results[0], results[1] = bases[1], bases[0], results[1], results[0]
		}
		turn++
		for i, base := range bases {
			r, err := runLoad(client, base, benchRoundTrips, false)
			if err != nil {
				b.Fatal(err)
			}
			results[i].merge(r)
		}
	}
	with.WaitConsumers(b)
	p50, p99 := lags.percentiles()
	b.ReportMetric(withRes.rps()/noneRes.rps(), "with/none")
	b.ReportMetric(p50.Seconds()*1000, "lag-p50-ms")
	b.ReportMetric(p99.Seconds()*1000, "lag-p99-ms")
	perChange := logMemoryPerChange(b, with)
	b.ReportMetric(perChange, "log-B/change")
	b.Logf("%d workers: none %.0f req/s, with a consumer %.0f req/s (%.2fx); commit to handler p50 %v p99 %v over %d changes; %.0f B of Redis memory per change in the log",
		benchWorkers, noneRes.rps(), withRes.rps(), withRes.rps()/noneRes.rps(), p50, p99, lags.count(), perChange)
}

// lagRecorder is a consumer's handler that records how long after its
// commit each change was handled.
type lagRecorder struct {
	mu   sync.Mutex
	lags []time.Duration
}

func (l *lagRecorder) handle(ctx *consumers.Ctx, c consumers.Change[counter.Counter]) consumers.Effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lags = append(l.lags, time.Since(c.At))
	return ctx.Done()
}

func (l *lagRecorder) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lags = nil
}

func (l *lagRecorder) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lags)
}

func (l *lagRecorder) percentiles() (p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lags) == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(l.lags))
	return s[len(s)/2], s[len(s)*99/100]
}

// logMemoryPerChange registers a consumer that never reads on the shard
// of one counter (so its log is not trimmed), increases the counter 200
// times, and returns the growth of the log's MEMORY USAGE per change.
func logMemoryPerChange(b *testing.B, ts *trellistest.Service) float64 {
	b.Helper()
	ctx := b.Context()
	const id, writes = "memory-probe", 200
	shard := cluster.ShardOf(counter.Entity.ComponentID(), id)
	if _, err := ts.Host().Store.(entities.ChangeLog).Register(ctx, "memory-probe", shard); err != nil {
		b.Fatal(err)
	}
	key := ts.Host().Config.RedisPrefix + ":entity:{" + cluster.ShardTag(shard) + "}:changes"
	usage := func() int64 {
		n, err := ts.Host().Redis.MemoryUsage(ctx, key, 0).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			b.Fatal(err)
		}
		return n
	}
	before := usage()
	for range writes {
		if _, err := counter.Increase.Invoke(ctx, ts.Host().Client, id, 1); err != nil {
			b.Fatal(err)
		}
	}
	return float64(usage()-before) / writes
}
