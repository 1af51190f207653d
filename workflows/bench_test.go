package workflows_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// Hops is the benchmark's workflow: three steps that do nothing but
// transition (a → b → c), then a step d that tells the benchmark the
// transition into it committed, and ends.
type Hops struct {
	N int `json:"n"`
}

var (
	HopsWF = workflows.Define("hops", func(string) Hops { return Hops{} })

	Hop = workflows.Command(HopsWF, "hop",
		func(ctx *workflows.Ctx[Hops, components.Done], s Hops, _ components.Done) workflows.Effect[Hops, components.Done] {
			return ctx.TransitionTo("a", nil).ThenReply(components.Done{})
		})

	hopsDone sync.Map // workflow id → chan struct{}
)

func init() {
	for step, next := range map[string]string{"a": "b", "b": "c", "c": "d"} {
		workflows.Step(HopsWF, step, func(ctx *workflows.StepCtx[Hops], s Hops, _ any) workflows.StepEffect[Hops] {
			s.N++
			return ctx.UpdateState(s).TransitionTo(next, nil)
		})
	}
	workflows.Step(HopsWF, "d", func(ctx *workflows.StepCtx[Hops], s Hops, _ any) workflows.StepEffect[Hops] {
		if ch, ok := hopsDone.LoadAndDelete(ctx.WorkflowID()); ok {
			close(ch.(chan struct{}))
		}
		return ctx.End()
	})
}

// transitionsPerWorkflow is what the benchmark counts of each workflow,
// every write of it: the command's that enters a, and the commits of a, b,
// c and d (its end). The clock stops once every end is committed.
const transitionsPerWorkflow = 5

// benchInFlight is how many workflows run at once.
const benchInFlight = 64

// BenchmarkWorkflowTransitions measures the transitions a workflow of
// three steps that only transition commits per second, benchInFlight
// workflows at once on one instance on Redis in the cluster mode (each
// transition one fenced script under the shard's fence), against in the
// same run a bare go-redis loop: benchInFlight goroutines each calling a
// script that writes a hash of the record's size and bumps a counter, one
// call per transition.
func BenchmarkWorkflowTransitions(b *testing.B) {
	app := &hopsApp{}
	ts := trellistest.StartInstances(b, 1, app.setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo }))[0]
	trellistest.WaitSettled(b, ts)
	n := max(b.N, 2000)
	warm := runHops(b, ts, 200) // warm up: entity activations, scripts loaded
	in, err := app.wf.Get(context.Background(), warm+"1")
	if err != nil {
		b.Fatal(err)
	}
	size := recordSize(b, in)

	b.ResetTimer()
	client := trellistest.Redis(b)
	wf := measure(b, client, func() {
		_ = runHops(b, ts, n)
		waitEnded(b, ts, 200+n)
	})
	bare := measure(b, client, func() { bareTransitions(b, client, n*transitionsPerWorkflow, size) })
	b.StopTimer()
	transitions := float64(n * transitionsPerWorkflow)
	b.ReportMetric(transitions/wf.wall.Seconds(), "transitions/s")
	b.ReportMetric(transitions/bare.wall.Seconds(), "bare-transitions/s")
	b.ReportMetric(bare.wall.Seconds()/wf.wall.Seconds(), "x-bare")
	b.ReportMetric(float64(size), "record-B")
	// Where the time goes: CPU of this process and of Redis per counted
	// transition, against the bare loop's per call.
	b.ReportMetric(float64(wf.cpu.Microseconds())/transitions, "cpu-µs/transition")
	b.ReportMetric(float64(wf.redis.Microseconds())/transitions, "redis-µs/transition")
	b.ReportMetric(float64(bare.cpu.Microseconds())/transitions, "bare-cpu-µs/transition")
	b.ReportMetric(float64(bare.redis.Microseconds())/transitions, "bare-redis-µs/transition")
	b.Logf("Redis ran for the workflows: %s; for the bare loop: %s", wf.commands, bare.commands)
}

// spent is what a part of a benchmark took: its wall time, this process's
// CPU and Redis's CPU.
type spent struct {
	wall, cpu, redis time.Duration
	commands         string // what Redis ran (RedisInfo.CommandsSince)
}

// measure runs f and returns what it took.
func measure(b *testing.B, client redis.UniversalClient, f func()) spent {
	info0, cpu0, start := testenv.ReadRedisInfo(b, client), testenv.ProcessCPU(), time.Now()
	f()
	wall, cpu, info := time.Since(start), testenv.ProcessCPU()-cpu0, testenv.ReadRedisInfo(b, client)
	return spent{wall: wall, cpu: cpu, redis: info.CPU - info0.CPU, commands: info.CommandsSince(info0)}
}

type hopsApp struct{ wf *workflows.Running[Hops] }

func (a *hopsApp) setup(h *trellis.Host, _ chi.Router) error {
	wf, err := HopsWF.Start(h.Workflows())
	a.wf = wf
	return err
}

var hopsRun atomic.Int64

// runHops runs n workflows, benchInFlight at a time, each to its step d,
// and returns the start of their ids (the number follows, from 1).
func runHops(b *testing.B, ts *trellistest.Service, n int) string {
	prefix := "h-" + strconv.FormatInt(hopsRun.Add(1), 10) + "-"
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchInFlight {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				id := prefix + strconv.FormatInt(i, 10)
				done := make(chan struct{})
				hopsDone.Store(id, done)
				if _, err := Hop.Invoke(context.Background(), ts.Client, id, components.Done{}); err != nil {
					b.Error(err)
					return
				}
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					b.Errorf("workflow %s did not reach its step d", id)
					return
				}
			}
		})
	}
	wg.Wait()
	return prefix
}

// waitEnded waits until the service counts n ended hops workflows: the
// commits of their ends, which runHops does not wait for.
func waitEnded(b *testing.B, ts *trellistest.Service, n int) {
	want := `trellis_workflow_ended_total{outcome="ended",workflow="hops"} ` + strconv.Itoa(n) + "\n"
	testenv.Eventually(b, 30*time.Second, "every hops workflow's end committed", func() bool {
		return strings.Contains(string(ts.Get(b, "/metrics").Body), want)
	})
}

// recordSize is the size of an instance as Get reads it (the record's
// JSON is what the script writes: the instance's fields with its history,
// about the same size).
func recordSize(b *testing.B, in any) int {
	raw, err := json.Marshal(in)
	if err != nil {
		b.Fatal(err)
	}
	return len(raw)
}

// bareScript writes a record of a transition's size and bumps a counter,
// in one call.
var bareScript = redis.NewScript(`redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'rev', redis.call('GET', KEYS[2]))
return 1`)

// bareTransitions makes n script calls from benchInFlight goroutines, each
// writing size bytes.
func bareTransitions(b *testing.B, client *redis.Client, n, size int) {
	data := make([]byte, size)
	for i := range data {
		data[i] = 'x'
	}
	prefix := "bench-bare-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	b.Cleanup(func() {
		keys, _ := client.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			client.Del(context.Background(), keys...)
		}
	})
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := range benchInFlight {
		wg.Go(func() {
			keys := []string{prefix + "{" + strconv.Itoa(g) + "}:rec", prefix + "{" + strconv.Itoa(g) + "}:revs"}
			for next.Add(1) <= int64(n) {
				if err := bareScript.Run(context.Background(), client, keys, data).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
