package timers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/timedactions"
)

// BenchmarkTimers is the timers' workload on a Redis of its own (started
// here, no persistence, so used_memory is the timers' alone), with a no-op
// timed action behind the real component client (or, in the -entity
// scenario, an entity command). Besides the timers' own figures it prints
// what Redis and this process spent while they fired (CPU, INFO
// commandstats), and the same-instant bursts on one instance print their
// yardstick from the same run: the same calls fired by a bare go-redis
// loop (bareBurst). Each scenario runs once whatever b.N is; run it with
//
//	go test -run '^$' -bench Timers -benchtime 1x ./timers/
//
// (not under -race, and not part of the normal test run).
func BenchmarkTimers(b *testing.B) {
	for _, sc := range []struct {
		// name is the sub-benchmark's name.
		name string
		// w is what it runs.
		w workload
	}{
		{"burst-50000-1-instance", workload{n: 50_000, delay: 5 * time.Second, instances: 1}},
		{"burst-50000-1-instance-same-instant", workload{n: 50_000, delay: sameInstantDelay, instances: 1, sameInstant: true}},
		{"burst-50000-1-instance-same-instant-entity", workload{n: 50_000, delay: sameInstantDelay, instances: 1, sameInstant: true, entity: true}},
		{"burst-50000-1-instance-same-instant-traced", workload{n: 50_000, delay: sameInstantDelay, instances: 1, sameInstant: true, traced: true}},
		{"spread-5000-over-5s", workload{n: 5_000, delay: time.Second, spread: 5 * time.Second, instances: 1}},
		{"burst-50000-2-instances", workload{n: 50_000, delay: 5 * time.Second, instances: 2}},
		{"burst-50000-2-instances-same-instant", workload{n: 50_000, delay: sameInstantDelay, instances: 2, sameInstant: true}},
	} {
		b.Run(sc.name, func(b *testing.B) {
			for b.Loop() {
				runTimerWorkload(b, sc.w)
			}
		})
	}
	b.Run("crashed-instance-rerun", func(b *testing.B) {
		for b.Loop() {
			runCrashRerun(b)
		}
	})
}

// flagFireProfile names a file for a CPU profile of the firing phase
// alone (from the end of creation until all are done), without the creates
// that -cpuprofile would mix in.
var flagFireProfile = flag.String("timers.fireprofile", "", "write a CPU profile of each scenario's firing phase to this file")

// sameInstantDelay is when the same-instant bursts fall due after their
// first create: every create must be done by then, which on a shared
// 2-core machine under load takes longer than 5 s.
const sameInstantDelay = 10 * time.Second

// firedSample is one call the no-op action saw.
type firedSample struct {
	at     time.Time
	firing Firing
}

// workload is one scenario of BenchmarkTimers.
type workload struct {
	// n is the number of timers, each with a 1 KB argument.
	n int
	// delay is the delay of the first timer; spread is added across the
	// timers (timer i gets delay + spread*i/n).
	delay, spread time.Duration
	// instances is the number of schedulers sharing the Redis.
	instances int
	// sameInstant makes every timer due at one instant, delay after the
	// first create: a true burst. Otherwise each timer is due delay after
	// its own create, so due times span the creation.
	sameInstant bool
	// entity makes the callee an entity command (on the runtime, with the
	// in-memory entity store) instead of the no-op timed action.
	entity bool
	// traced turns tracing on, sampling everything: each create runs in a
	// span of its own (as in a request) and its timer keeps its trace
	// context; each run is a span linked to it, exported over OTLP/HTTP
	// through the service's bounded queue to a collector in the process
	// that discards what it reads.
	traced bool
}

// benchAction is the callee behind the real component client; samples is
// where the calls are recorded.
type benchAction struct {
	mu      sync.Mutex
	samples []firedSample
	client  *components.Client
	// afterCall records each call when it returns, for a callee that does
	// not see the timer's context (an entity command runs on its actor).
	afterCall bool
}

var (
	benchActionDef = timedactions.Define("bench-action")
	benchNoop      = timedactions.Method(benchActionDef, "noop", func(ctx *timedactions.Ctx, _ string) timedactions.Effect {
		if rec, ok := ctx.Context().Value(benchKey{}).(*benchAction); ok {
			f, _ := FiringFromContext(ctx.Context())
			rec.record(f)
		}
		return ctx.Done()
	})

	// benchEntities counts the calls each entity got: a command that
	// decodes its argument, reads and writes its state.
	benchEntities = entities.Define("bench-entity", func(string) benchCount { return benchCount{} })
	benchTouch    = entities.Command(benchEntities, "touch",
		func(ctx *entities.Ctx[benchCount, components.Done], c benchCount, _ string) entities.Effect[benchCount, components.Done] {
			c.Calls++
			return ctx.UpdateState(c).ThenReply(components.Done{})
		})
)

// benchCount is an entity's state.
type benchCount struct {
	Calls int `json:"calls"`
}

type benchKey struct{}

func (a *benchAction) record(f Firing) {
	at := time.Now()
	a.mu.Lock()
	a.samples = append(a.samples, firedSample{at: at, firing: f})
	a.mu.Unlock()
}

// Tracer is the client's, as a components.Client's: the scheduler traces
// with it when it is not nil.
func (a *benchAction) Tracer() trace.Tracer { return a.client.Tracer() }

// Dispatch runs the call through the real client, with the recorder in
// the context for the action to find.
func (a *benchAction) Dispatch(ctx context.Context, call components.DeferredCall) (json.RawMessage, error) {
	res, err := a.client.Dispatch(context.WithValue(ctx, benchKey{}, a), call)
	if a.afterCall && err == nil {
		f, _ := FiringFromContext(ctx)
		a.record(f)
	}
	return res, err
}

func newBenchAction(b *testing.B, entity bool, tracer trace.Tracer) *benchAction {
	client := components.NewClient(components.NewRegistry(), components.WithTracer(tracer))
	if _, err := benchActionDef.Start(client); err != nil {
		b.Fatal(err)
	}
	if entity {
		sys := runtime.NewSystem(b.Name(), runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := sys.Shutdown(ctx); err != nil {
				b.Errorf("shutdown the entities' system: %v", err)
			}
		})
		if _, err := benchEntities.Start(entities.Host{System: sys, Client: client, Store: entities.NewMemoryStore()}); err != nil {
			b.Fatal(err)
		}
	}
	return &benchAction{client: client, afterCall: entity}
}

// benchCall is the call of timer i: the no-op action, or a command on one
// of 1,000 entities, with arg as its argument.
func benchCall(b *testing.B, entity bool, i int, arg string) components.DeferredCall {
	var call components.DeferredCall
	var err error
	if entity {
		call, err = benchTouch.Deferred("e-"+strconv.Itoa(i%1000), arg)
	} else {
		call, err = benchNoop.Deferred(arg)
	}
	if err != nil || len(call.Argument) != 1024 {
		b.Fatalf("payload %d bytes, %v", len(call.Argument), err)
	}
	return call
}

// benchTracer is nil (tracing off), or with traced a tracer sampling
// everything into a pipeline that exports to a collector in the process.
func benchTracer(b *testing.B, traced bool) trace.Tracer {
	if !traced {
		return nil
	}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(collector.Close)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(collector.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	p := tracing.NewPipelineWith(exp, tracing.DefaultQueueSize, sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() {
		_ = p.Shutdown(context.Background())
		b.Logf("  tracing: %s", p.Counts())
	})
	return p.Tracer()
}

func runTimerWorkload(b *testing.B, w workload) {
	srv := testenv.StartRedisServer(b)
	runTimerWorkloadOn(b, func() redis.UniversalClient { return srv.Client(b) }, srv.Client(b), w)
}

// runTimerWorkloadOn runs the workload with one client per instance from
// connect, reading Redis's figures through admin.
func runTimerWorkloadOn(b *testing.B, connect func() redis.UniversalClient, admin redis.UniversalClient, w workload) {
	n, delay, spread, instances, sameInstant := w.n, w.delay, w.spread, w.instances, w.sameInstant
	tracer := benchTracer(b, w.traced)
	action := newBenchAction(b, w.entity, tracer)
	// 1,024 bytes of JSON: a string of random base64, as incompressible
	// as JSON text gets short of escapes (6 bits of entropy per byte).
	raw := make([]byte, 800)
	_, _ = rand.Read(raw)
	arg := base64.StdEncoding.EncodeToString(raw)[:1022]
	var scheds []*Scheduler
	for range instances {
		scheds = append(scheds, startScheduler(b, NewRedisStore(connect(), "bench"), action, Config{}))
	}
	before := testenv.ReadRedisInfo(b, admin).UsedMemory

	// Create from 16 goroutines, as concurrent endpoints would.
	earliest := make([]time.Time, n)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				call := benchCall(b, w.entity, i, arg)
				d := delay + time.Duration(int64(spread)*int64(i)/int64(n))
				if sameInstant {
					d = time.Until(start.Add(delay))
					if d < 0 {
						b.Errorf("creating took longer than the delay %v: the burst would not be one instant", delay)
						return
					}
				}
				earliest[i] = time.Now().Add(d)
				ctx, span := tracing.Start(context.Background(), tracer, "create", trace.SpanKindServer)
				_, err := scheds[c%instances].Create(ctx, "t-"+strconv.Itoa(i), d, call)
				span.End()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	created := time.Since(start)
	pendingInfo := testenv.ReadRedisInfo(b, admin)
	pending := pendingInfo.UsedMemory
	st, _ := scheds[0].Stats(context.Background())
	stopProfile := startFireProfile(b)
	var mem0, mem1 goruntime.MemStats
	goruntime.ReadMemStats(&mem0)
	cpu0 := testenv.ProcessCPU()

	waitFor(b, "every timer to run", func() bool {
		action.mu.Lock()
		defer action.mu.Unlock()
		return len(action.samples) >= n
	})
	waitFor(b, "the store to empty", func() bool {
		st, err := scheds[0].Stats(context.Background())
		return err == nil && st.Active == 0
	})
	allDone := time.Now()
	goCPU := testenv.ProcessCPU() - cpu0
	goruntime.ReadMemStats(&mem1)
	stopProfile()
	doneInfo := testenv.ReadRedisInfo(b, admin)

	action.mu.Lock()
	samples := slices.Clone(action.samples)
	action.mu.Unlock()
	var late []time.Duration
	var early int
	var firstDue, lastDue, firstCall time.Time
	for _, s := range samples {
		i, _ := strconv.Atoi(strings.TrimPrefix(s.firing.Name, "t-"))
		if s.at.Before(s.firing.DueAt) || s.at.Before(earliest[i]) {
			early++
		}
		late = append(late, s.at.Sub(s.firing.DueAt))
		if firstDue.IsZero() || s.firing.DueAt.Before(firstDue) {
			firstDue = s.firing.DueAt
		}
		if s.firing.DueAt.After(lastDue) {
			lastDue = s.firing.DueAt
		}
		if firstCall.IsZero() || s.at.Before(firstCall) {
			firstCall = s.at
		}
	}
	slices.Sort(late)
	pct := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	firing := allDone.Sub(firstCall)
	callee := "no-op timed action"
	if w.entity {
		callee = "entity command (in-memory entity store)"
	}
	b.Logf("%d timers (1 KB argument), %d instance(s), delay %v + spread %v, all due at one instant: %v; callee: %s",
		n, instances, delay, spread, sameInstant, callee)
	b.Logf("  created in %v: %.0f timers/s (16 concurrent creators); store held %d", created.Round(time.Millisecond), float64(n)/created.Seconds(), st.Active)
	b.Logf("  Redis used_memory per pending timer: %d bytes (%d → %d)", (pending-before)/int64(n), before, pending)
	b.Logf("  due times span %v; all done %v after the last due time, %v after the first",
		lastDue.Sub(firstDue).Round(time.Millisecond), allDone.Sub(lastDue).Round(time.Millisecond), allDone.Sub(firstDue).Round(time.Millisecond))
	b.Logf("  firing: %d calls in %v = %.0f calls/s", len(samples), firing.Round(time.Millisecond), float64(len(samples))/firing.Seconds())
	b.Logf("  this process from the end of creation to all done: %v CPU (%.1f µs per timer), %.1f allocations per timer",
		goCPU.Round(time.Millisecond), float64(goCPU.Microseconds())/float64(n), float64(mem1.Mallocs-mem0.Mallocs)/float64(n))
	b.ReportMetric(float64(goCPU.Microseconds())/float64(n), "go-cpu-us/timer")
	redisCPU := doneInfo.CPU - pendingInfo.CPU
	b.Logf("  Redis from the end of creation to all done: %v CPU (%.1f µs per timer); %s",
		redisCPU.Round(time.Millisecond), float64(redisCPU.Microseconds())/float64(n), doneInfo.CommandsSince(pendingInfo))
	b.ReportMetric(float64(redisCPU.Microseconds())/float64(n), "redis-cpu-us/timer")
	b.Logf("  lateness p50 %v, p99 %v, max %v; early fires %d; calls %d for %d timers",
		pct(.50).Round(100*time.Microsecond), pct(.99).Round(100*time.Microsecond), late[len(late)-1].Round(100*time.Microsecond), early, len(samples), n)
	b.ReportMetric(float64(n)/created.Seconds(), "created/s")
	b.ReportMetric(float64(len(samples))/firing.Seconds(), "fired/s")
	b.ReportMetric(float64(pct(.99).Milliseconds()), "p99-late-ms")
	b.ReportMetric(float64(late[len(late)-1].Milliseconds()), "max-late-ms")
	b.ReportMetric(float64(early), "early")
	b.ReportMetric(float64((pending-before)/int64(n)), "redis-B/timer")
	b.ReportMetric(allDone.Sub(lastDue).Seconds(), "done-after-due-s")
	if sameInstant && instances == 1 {
		calls := make([]components.DeferredCall, n)
		for i := range calls {
			calls[i] = benchCall(b, w.entity, i, arg)
		}
		bare, bareGo, bareRedis := bareBurst(b, admin, newBenchAction(b, w.entity, nil), calls)
		b.Logf("  yardstick, the same calls fired by a bare go-redis loop (ZPOPMIN, HMGET+HDEL, %d workers): all done %v after due, this process %.1f µs and Redis %.1f µs of CPU per timer; the scheduler took %.2fx that",
			bareWorkers, bare.Round(time.Millisecond), float64(bareGo.Microseconds())/float64(n), float64(bareRedis.Microseconds())/float64(n), allDone.Sub(lastDue).Seconds()/bare.Seconds())
		b.ReportMetric(bare.Seconds(), "bare-done-after-due-s")
		b.ReportMetric(float64(bareGo.Microseconds())/float64(n), "bare-go-cpu-us/timer")
		b.ReportMetric(float64(bareRedis.Microseconds())/float64(n), "bare-redis-cpu-us/timer")
		b.ReportMetric(allDone.Sub(lastDue).Seconds()/bare.Seconds(), "x-bare")
	}
}

// startFireProfile starts the CPU profile of -timers.fireprofile, if set;
// the function it returns stops it.
func startFireProfile(b *testing.B) (stop func()) {
	if *flagFireProfile == "" {
		return func() {}
	}
	f, err := os.Create(*flagFireProfile)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// runCrashRerun: an instance claims 1,000 due timers under the default
// 30 s lease and dies (never reports); another instance runs them all
// again when the lease expires.
func runCrashRerun(b *testing.B) {
	srv := testenv.StartRedisServer(b)
	action := newBenchAction(b, false, nil)
	call, _ := benchNoop.Deferred("x")
	store := NewRedisStore(srv.Client(b), "bench")
	creator := newScheduler(b, store, action, Config{})
	const n = 1000
	for i := range n {
		mustCreate(b, creator, "t-"+strconv.Itoa(i), 0, call)
	}
	// The dying instance claims them all (those created in the current
	// millisecond become due in the next).
	crashed := time.Now()
	for claimed := 0; claimed < n; {
		got, err := store.claim(context.Background(), n, DefaultLease)
		if err != nil || time.Since(crashed) > time.Second {
			b.Fatalf("claim: %d, %v", claimed, err)
		}
		claimed += len(got.timers)
	}
	startScheduler(b, NewRedisStore(srv.Client(b), "bench"), action, Config{})
	waitFor2(b, 45*time.Second, func() bool {
		action.mu.Lock()
		defer action.mu.Unlock()
		return len(action.samples) >= n
	})
	action.mu.Lock()
	first, last := action.samples[0].at, action.samples[n-1].at
	action.mu.Unlock()
	b.Logf("crashed instance held %d timers under a %v lease: re-run by the other from %v to %v after the crash",
		n, DefaultLease, first.Sub(crashed).Round(time.Millisecond), last.Sub(crashed).Round(time.Millisecond))
	b.ReportMetric(last.Sub(crashed).Seconds(), "rerun-s")
}

// waitFor2 is waitFor with a longer bound, for the lease.
func waitFor2(b *testing.B, bound time.Duration, cond func() bool) {
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("not done within %v", bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
