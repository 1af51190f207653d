package timers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

var (
	flagRecurTimers  = flag.Int("timers.recurring", 50_000, "how many recurring timers BenchmarkRecurringTimers runs")
	flagRecurMinutes = flag.Int("timers.recurminutes", 2, "how many minutes of steady state BenchmarkRecurringTimers measures")
)

// BenchmarkRecurringTimers runs 50,000 recurring timers, each every
// minute, on a Redis of its own, in real time (no compressed clock): their
// starts are spread evenly over a minute, so that they run at a steady
// ~833 runs/s, and it measures -timers.recurminutes minutes of it. It
// prints the lateness of each run against its scheduled time (p50, p99,
// max, and runs started early: must be 0), and Redis and process CPU per
// run. The one-shot burst of 50,000 timers runs first in the same process,
// as the baseline:
//
//	go test -run '^$' -bench RecurringTimers -benchtime 1x ./timers/
func BenchmarkRecurringTimers(b *testing.B) {
	b.Run("baseline-burst-50000-1-instance", func(b *testing.B) {
		for b.Loop() {
			runTimerWorkload(b, workload{n: 50_000, delay: 5 * time.Second, instances: 1})
		}
	})
	b.Run("recurring-every-minute", func(b *testing.B) {
		for b.Loop() {
			runRecurring(b, *flagRecurTimers, time.Minute, *flagRecurMinutes)
		}
	})
}

func runRecurring(b *testing.B, n int, every time.Duration, minutes int) {
	srv := testenv.StartRedisServer(b)
	admin := srv.Client(b)
	action := newBenchAction(b, false, nil)
	raw := make([]byte, 800)
	_, _ = rand.Read(raw)
	arg := base64.StdEncoding.EncodeToString(raw)[:1022]
	sched := startScheduler(b, NewRedisStore(srv.Client(b), "bench"), action, Config{})

	// Creation must be done before the first start: 50,000 creates of a
	// 1 KB timer take a few seconds on a loaded 2-core machine.
	const headroom = 30 * time.Second
	t0 := time.Now().Add(headroom).Truncate(time.Second)
	var next atomic.Int64
	var wg sync.WaitGroup
	created := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				start := t0.Add(time.Duration(int64(every) * int64(i) / int64(n)))
				sc := Schedule{Every: every, Start: start}
				if _, err := sched.CreateRecurring(context.Background(), "r-"+strconv.Itoa(i), sc, benchCall(b, false, i, arg)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if time.Now().After(t0) {
		b.Fatalf("creating %d recurring timers took %v, past the first start", n, time.Since(created))
	}
	b.Logf("%d recurring timers (1 KB argument), every %v, starts spread over the first interval: created in %v",
		n, every, time.Since(created).Round(time.Millisecond))

	end := t0.Add(time.Duration(minutes) * every)
	waitUntil := func(at time.Time) {
		for time.Now().Before(at) {
			time.Sleep(min(time.Until(at), time.Second))
		}
	}
	waitUntil(t0)
	info0, cpu0 := testenv.ReadRedisInfo(b, admin), testenv.ProcessCPU()
	want := n * minutes // runs scheduled in [t0, end)
	inWindow := func() []firedSample {
		action.mu.Lock()
		defer action.mu.Unlock()
		var out []firedSample
		for _, s := range action.samples {
			if !s.firing.Run.Before(t0) && s.firing.Run.Before(end) {
				out = append(out, s)
			}
		}
		return out
	}
	waitUntil(end)
	waitFor2(b, 2*time.Minute, func() bool { return len(inWindow()) >= want })
	info1, cpu1 := testenv.ReadRedisInfo(b, admin), testenv.ProcessCPU()

	samples := inWindow()
	seen := make(map[string]int, len(samples))
	late := make([]time.Duration, 0, len(samples))
	early := 0
	for _, s := range samples {
		seen[s.firing.Name+"@"+s.firing.Run.String()]++
		if s.at.Before(s.firing.Run) {
			early++
		}
		late = append(late, s.at.Sub(s.firing.Run))
	}
	slices.Sort(late)
	pct := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	runs := len(samples)
	b.Logf("  %d runs scheduled over %v (%.0f runs/s), %d calls, %d distinct runs",
		want, end.Sub(t0), float64(want)/end.Sub(t0).Seconds(), runs, len(seen))
	retried := 0
	for _, s := range samples {
		if s.firing.Attempt > 1 {
			retried++
		}
	}
	m := sched.metrics
	b.Logf("  calls of an attempt after the first: %d; retries %v, lease-expired re-runs %v, given up %v",
		retried, testutil.ToFloat64(m.retries), testutil.ToFloat64(m.leaseExpired), testutil.ToFloat64(m.givenUp))
	b.Logf("  lateness against the scheduled time: p50 %v, p99 %v, max %v; early %d",
		pct(.5), pct(.99), late[len(late)-1], early)
	b.Logf("  per run: Redis CPU %.1f µs, this process %.1f µs; Redis %s",
		float64((info1.CPU-info0.CPU).Microseconds())/float64(runs), float64((cpu1-cpu0).Microseconds())/float64(runs),
		info1.CommandsSince(info0))
	b.ReportMetric(float64(pct(.5).Microseconds())/1000, "p50-late-ms")
	b.ReportMetric(float64(pct(.99).Microseconds())/1000, "p99-late-ms")
	b.ReportMetric(float64(early), "early")
	if early > 0 || len(seen) != want {
		b.Errorf("%d early runs, %d distinct runs of %d", early, len(seen), want)
	}
}
