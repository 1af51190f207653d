package workflows_test

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// BenchMoves is the latency benchmark's transfer: withdraw (an entity
// command, a transition), deposit (the same), then done, which tells the
// benchmark that the deposit's transition committed, and ends.
var (
	BenchMoves = workflows.Define("bench-move", func(string) Transfer { return Transfer{} })

	BeginBenchMove = workflows.Command(BenchMoves, "begin",
		func(ctx *workflows.Ctx[Transfer, components.Done], _ Transfer, req Transfer) workflows.Effect[Transfer, components.Done] {
			return ctx.UpdateState(req).TransitionTo("withdraw", nil).ThenReply(components.Done{})
		})

	movesDone sync.Map // workflow id → chan struct{}
)

func init() {
	workflows.Step(BenchMoves, "withdraw", func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
		if _, err := Debit.Invoke(ctx.Context(), ctx.Client(), s.From, s.Amount); err != nil {
			return ctx.Fail("withdraw: %v", err)
		}
		return ctx.TransitionTo("deposit", nil)
	})
	workflows.Step(BenchMoves, "deposit", func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
		if _, err := Credit.Invoke(ctx.Context(), ctx.Client(), s.To, s.Amount); err != nil {
			return ctx.Fail("deposit: %v", err)
		}
		return ctx.TransitionTo("done", nil)
	})
	workflows.Step(BenchMoves, "done", func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
		if ch, ok := movesDone.LoadAndDelete(ctx.WorkflowID()); ok {
			close(ch.(chan struct{}))
		}
		return ctx.End()
	})
}

// BenchmarkWorkflowTransferLatency measures a transfer of two entity
// commands and three transitions, from its start command to the commit of
// its deposit, on one instance on Redis in the cluster mode: first the
// most transfers per second benchInFlight at once sustain, then the
// latencies of transfers started at half that rate (p50 and p99, as
// p50-ms and p99-ms).
func BenchmarkWorkflowTransferLatency(b *testing.B) {
	ts := trellistest.StartInstances(b, 1, func(h *trellis.Host, _ chi.Router) error {
		if _, err := Wallets.Start(h.Entities()); err != nil {
			return err
		}
		_, err := BenchMoves.Start(h.Workflows())
		return err
	}, trellistest.WithLogger(slog.New(slog.DiscardHandler)))[0]
	trellistest.WaitSettled(b, ts)
	const wallets = 64
	for i := range wallets {
		if _, err := Credit.Invoke(context.Background(), ts.Client, "bw-"+strconv.Itoa(i), 1<<30); err != nil {
			b.Fatal(err)
		}
	}
	n := max(b.N, 500)
	var run atomic.Int64
	// move starts one transfer and returns how long it took to commit its
	// deposit.
	move := func() time.Duration {
		i := run.Add(1)
		id := "bm-" + strconv.FormatInt(i, 10)
		done := make(chan struct{})
		movesDone.Store(id, done)
		req := Transfer{From: "bw-" + strconv.FormatInt(i%wallets, 10), To: "bw-" + strconv.FormatInt((i+1)%wallets, 10), Amount: 1}
		start := time.Now()
		if _, err := BeginBenchMove.Invoke(context.Background(), ts.Client, id, req); err != nil {
			b.Error(err)
			return 0
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Errorf("transfer %s did not commit its deposit within 30s", id)
		}
		return time.Since(start)
	}

	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range benchInFlight {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				move()
			}
		})
	}
	wg.Wait()
	full := time.Since(start)
	rate := float64(n) / full.Seconds()

	every := time.Duration(float64(time.Second) / (rate / 2))
	latencies := make([]time.Duration, n)
	tick := time.NewTicker(every)
	for i := range n {
		<-tick.C
		wg.Go(func() { latencies[i] = move() })
	}
	tick.Stop()
	wg.Wait()
	b.StopTimer()
	slices.Sort(latencies)
	ms := func(q float64) float64 { return float64(latencies[int(q*float64(n-1))].Microseconds()) / 1000 }
	b.ReportMetric(rate, "max-transfers/s")
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}
