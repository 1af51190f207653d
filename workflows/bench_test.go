package workflows_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
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

// transitionsPerWorkflow is what the benchmark counts of each workflow:
// the command's write that enters a, and the commits of a, b and c (d's
// end is written too, and not counted).
const transitionsPerWorkflow = 4

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
	wf := timeIt(func() { _ = runHops(b, ts, n) })
	bare := timeIt(func() { bareTransitions(b, trellistest.Redis(b), n*transitionsPerWorkflow, size) })
	b.StopTimer()
	transitions := float64(n * transitionsPerWorkflow)
	b.ReportMetric(transitions/wf.Seconds(), "transitions/s")
	b.ReportMetric(transitions/bare.Seconds(), "bare-transitions/s")
	b.ReportMetric(bare.Seconds()/wf.Seconds(), "x-bare")
	b.ReportMetric(float64(size), "record-B")
}

type hopsApp struct{ wf *workflows.Running[Hops] }

func (a *hopsApp) setup(h *trellis.Host, _ chi.Router) error {
	wf, err := HopsWF.Start(h.Workflows())
	a.wf = wf
	return err
}

func timeIt(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
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
