package timers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testenv"
	"github.com/trellis-go/trellis/timedactions"
)

// BenchmarkTimers is the workload on a Redis of its own (started
// here, no persistence, so used_memory is the timers' alone), with a no-op
// timed action behind the real component client. Each scenario runs once
// whatever b.N is; run it with
//
//	go test -run '^$' -bench Timers -benchtime 1x ./timers/
//
// (not under -race, and not part of the normal test run).
func BenchmarkTimers(b *testing.B) {
	for _, sc := range []struct {
		// name is the sub-benchmark's name.
		name string
		// n is the number of timers, each with a 1 KB argument.
		n int
		// delay is the delay of the first timer; spread is added across
		// the timers (timer i gets delay + spread*i/n).
		delay, spread time.Duration
		// instances is the number of schedulers sharing the Redis.
		instances int
		// sameInstant makes every timer due at one instant, delay after
		// the first create: a true burst. Otherwise each timer is due
		// delay after its own create, so due times span the creation.
		sameInstant bool
	}{
		{"burst-50000-1-instance", 50_000, 5 * time.Second, 0, 1, false},
		{"burst-50000-1-instance-same-instant", 50_000, 5 * time.Second, 0, 1, true},
		{"spread-5000-over-5s", 5_000, time.Second, 5 * time.Second, 1, false},
		{"burst-50000-2-instances", 50_000, 5 * time.Second, 0, 2, false},
		{"burst-50000-2-instances-same-instant", 50_000, 5 * time.Second, 0, 2, true},
	} {
		b.Run(sc.name, func(b *testing.B) {
			for b.Loop() {
				runTimerWorkload(b, sc.n, sc.delay, sc.spread, sc.instances, sc.sameInstant)
			}
		})
	}
	b.Run("crashed-instance-rerun", func(b *testing.B) {
		for b.Loop() {
			runCrashRerun(b)
		}
	})
}

// firedSample is one call the no-op action saw.
type firedSample struct {
	at     time.Time
	firing Firing
}

// benchAction is the no-op timed action; samples is where it records.
type benchAction struct {
	mu      sync.Mutex
	samples []firedSample
	client  *components.Client
}

var (
	benchActionDef = timedactions.Define("bench-action")
	benchNoop      = timedactions.Method(benchActionDef, "noop", func(ctx *timedactions.Ctx, _ string) timedactions.Effect {
		if rec, ok := ctx.Context().Value(benchKey{}).(*benchAction); ok {
			f, _ := FiringFromContext(ctx.Context())
			at := time.Now()
			rec.mu.Lock()
			rec.samples = append(rec.samples, firedSample{at: at, firing: f})
			rec.mu.Unlock()
		}
		return ctx.Done()
	})
)

type benchKey struct{}

// Dispatch runs the call through the real client, with the recorder in
// the context for the action to find.
func (a *benchAction) Dispatch(ctx context.Context, call components.DeferredCall) (json.RawMessage, error) {
	return a.client.Dispatch(context.WithValue(ctx, benchKey{}, a), call)
}

func newBenchAction(b *testing.B) *benchAction {
	client := components.NewClient(components.NewRegistry())
	if _, err := benchActionDef.Start(client); err != nil {
		b.Fatal(err)
	}
	return &benchAction{client: client}
}

func usedMemory(b *testing.B, c redis.UniversalClient) int64 {
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO")
	return 0
}

func runTimerWorkload(b *testing.B, n int, delay, spread time.Duration, instances int, sameInstant bool) {
	srv := testenv.StartRedisServer(b)
	mem := srv.Client(b)
	runTimerWorkloadOn(b, func() redis.UniversalClient { return srv.Client(b) },
		func() int64 { return usedMemory(b, mem) }, n, delay, spread, instances, sameInstant)
}

// runTimerWorkloadOn runs the workload with one client per instance from
// connect, measuring Redis memory with usedMem.
func runTimerWorkloadOn(b *testing.B, connect func() redis.UniversalClient, usedMem func() int64,
	n int, delay, spread time.Duration, instances int, sameInstant bool) {
	action := newBenchAction(b)
	// 1,024 bytes of JSON: a string of random base64, as incompressible
	// as JSON text gets short of escapes (6 bits of entropy per byte).
	raw := make([]byte, 800)
	_, _ = rand.Read(raw)
	arg := `"` + base64.StdEncoding.EncodeToString(raw)[:1022] + `"`
	call, err := benchNoop.Deferred(arg[1 : len(arg)-1])
	if err != nil || len(call.Argument) != 1024 {
		b.Fatalf("payload %d bytes, %v", len(call.Argument), err)
	}
	var scheds []*Scheduler
	for range instances {
		scheds = append(scheds, startScheduler(b, NewRedisStore(connect(), "bench"), action, Config{}))
	}
	before := usedMem()

	// Create from 16 goroutines, as concurrent endpoints would.
	earliest := make([]time.Time, n)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				d := delay + time.Duration(int64(spread)*int64(i)/int64(n))
				if sameInstant {
					d = time.Until(start.Add(delay))
				}
				earliest[i] = time.Now().Add(d)
				if _, err := scheds[w%instances].Create(context.Background(), "t-"+strconv.Itoa(i), d, call); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	created := time.Since(start)
	pending := usedMem()
	st, _ := scheds[0].Stats(context.Background())

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
	b.Logf("%d timers (1 KB argument), %d instance(s), delay %v + spread %v, all due at one instant: %v", n, instances, delay, spread, sameInstant)
	b.Logf("  created in %v: %.0f timers/s (16 concurrent creators); store held %d", created.Round(time.Millisecond), float64(n)/created.Seconds(), st.Active)
	b.Logf("  Redis used_memory per pending timer: %d bytes (%d → %d)", (pending-before)/int64(n), before, pending)
	b.Logf("  due times span %v; all done %v after the last due time, %v after the first",
		lastDue.Sub(firstDue).Round(time.Millisecond), allDone.Sub(lastDue).Round(time.Millisecond), allDone.Sub(firstDue).Round(time.Millisecond))
	b.Logf("  firing: %d calls in %v = %.0f calls/s", len(samples), firing.Round(time.Millisecond), float64(len(samples))/firing.Seconds())
	b.Logf("  lateness p50 %v, p99 %v, max %v; early fires %d; calls %d for %d timers",
		pct(.50).Round(100*time.Microsecond), pct(.99).Round(100*time.Microsecond), late[len(late)-1].Round(100*time.Microsecond), early, len(samples), n)
	b.ReportMetric(float64(n)/created.Seconds(), "created/s")
	b.ReportMetric(float64(len(samples))/firing.Seconds(), "fired/s")
	b.ReportMetric(float64(pct(.99).Milliseconds()), "p99-late-ms")
	b.ReportMetric(float64(late[len(late)-1].Milliseconds()), "max-late-ms")
	b.ReportMetric(float64(early), "early")
	b.ReportMetric(float64((pending-before)/int64(n)), "redis-B/timer")
}

// runCrashRerun: an instance claims 1,000 due timers under the default
// 30 s lease and dies (never reports); another instance runs them all
// again when the lease expires.
func runCrashRerun(b *testing.B) {
	srv := testenv.StartRedisServer(b)
	action := newBenchAction(b)
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
