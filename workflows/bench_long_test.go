package workflows_test

import (
	"context"
	"flag"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// longSteps is how many steps BenchmarkWorkflowLongRun runs its one
// workflow through.
var longSteps = flag.Int("workflow-long-steps", 10_000, "steps of BenchmarkWorkflowLongRun's workflow (at least 1000)")

// Spin is the long-run benchmark's workflow: one step that transitions to
// itself, counting, until it has run Until times, then ends.
type Spin struct {
	N     int `json:"n"`
	Until int `json:"until"`
}

// spinRun is what the benchmark sees of a Spin instance: when each run of
// its step started (index: the count before it), and done closed once it
// ended.
type spinRun struct {
	at   []time.Time
	done chan struct{}
}

var (
	SpinWF = workflows.Define("spin", func(string) Spin { return Spin{} })

	BeginSpin = workflows.Command(SpinWF, "begin",
		func(ctx *workflows.Ctx[Spin, components.Done], _ Spin, until int) workflows.Effect[Spin, components.Done] {
			return ctx.UpdateState(Spin{Until: until}).TransitionTo("spin", nil).ThenReply(components.Done{})
		})

	spinRuns sync.Map // workflow id → *spinRun
)

func init() {
	workflows.Step(SpinWF, "spin", func(ctx *workflows.StepCtx[Spin], s Spin, _ any) workflows.StepEffect[Spin] {
		v, _ := spinRuns.Load(ctx.WorkflowID())
		run := v.(*spinRun)
		run.at[s.N] = time.Now()
		s.N++
		if s.N == s.Until {
			close(run.done)
			return ctx.UpdateState(s).End()
		}
		return ctx.UpdateState(s).TransitionTo("spin", nil)
	})
}

// BenchmarkWorkflowLongRun runs one workflow through longSteps steps (a
// step that transitions to itself, its state a counter) on one instance on
// Redis in the cluster mode, and reports what one step costs (one commit
// of its transition, the read and the run of the next) around its 10th,
// 1,000th and last step: the median time between two runs of the step
// over the 9 steps up to the 10th, and over the 100 steps up to the
// others. A record keeps a bounded history and a step replays nothing, so
// the three are the same. In the same run, a bare go-redis loop of one
// goroutine calls a script that writes a hash of the record's size and
// bumps a counter; bare-us is its median call, and x-bare-last the bare
// call over the last step's cost.
func BenchmarkWorkflowLongRun(b *testing.B) {
	steps := max(*longSteps, 1000)
	app := &spinApp{}
	ts := trellistest.StartInstances(b, 1, app.setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) { c.LogLevel = slog.LevelInfo }))[0]
	trellistest.WaitSettled(b, ts)
	_ = spin(b, ts, "spin-warm", 200) // warm up: activations, scripts loaded

	b.ResetTimer()
	at := spin(b, ts, "spin-long", steps)
	b.StopTimer()
	in, err := app.wf.Get(context.Background(), "spin-long")
	if err != nil {
		b.Fatal(err)
	}
	size := recordSize(b, in)
	bare := bareCall(b, 2000, size)

	cost := func(upTo, window int) float64 { return medianGap(at[upTo-window : upTo]) }
	last := cost(steps, 100)
	b.ReportMetric(cost(10, 10), "step10-us")
	b.ReportMetric(cost(1000, 100), "step1k-us")
	b.ReportMetric(last, "steplast-us")
	b.ReportMetric(float64(steps), "steps")
	b.ReportMetric(bare, "bare-us")
	b.ReportMetric(bare/last, "x-bare-last")
	b.ReportMetric(float64(size), "record-B")
	b.ReportMetric(float64(len(in.History)), "history")
}

type spinApp struct{ wf *workflows.Running[Spin] }

func (a *spinApp) setup(h *trellis.Host, _ chi.Router) error {
	wf, err := SpinWF.Start(h.Workflows())
	a.wf = wf
	return err
}

// spin runs workflow id through steps steps and returns when each run of
// its step started.
func spin(b *testing.B, ts *trellistest.Service, id string, steps int) []time.Time {
	run := &spinRun{at: make([]time.Time, steps), done: make(chan struct{})}
	spinRuns.Store(id, run)
	defer spinRuns.Delete(id)
	if _, err := BeginSpin.Invoke(context.Background(), ts.Client, id, steps); err != nil {
		b.Fatal(err)
	}
	select {
	case <-run.done:
	case <-time.After(time.Duration(steps) * 50 * time.Millisecond):
		b.Fatalf("workflow %s did not run its %d steps", id, steps)
	}
	return run.at
}

// medianGap is the median time between consecutive times of at, in µs.
func medianGap(at []time.Time) float64 {
	gaps := make([]time.Duration, 0, len(at)-1)
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	slices.Sort(gaps)
	return float64(gaps[len(gaps)/2].Nanoseconds()) / 1000
}

// bareCall makes n script calls one after the other, each writing size
// bytes, and returns the median call in µs.
func bareCall(b *testing.B, n, size int) float64 {
	client := trellistest.Redis(b)
	data := make([]byte, size)
	for i := range data {
		data[i] = 'x'
	}
	prefix := "bench-bare-long-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	keys := []string{prefix + "{0}:rec", prefix + "{0}:revs"}
	b.Cleanup(func() { client.Del(context.Background(), keys...) })
	at := make([]time.Time, n+1)
	at[0] = time.Now()
	for i := 1; i <= n; i++ {
		if err := bareScript.Run(context.Background(), client, keys, data).Err(); err != nil {
			b.Fatal(err)
		}
		at[i] = time.Now()
	}
	return medianGap(at)
}
