package trellistest_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/timedactions"
	"github.com/trellis-go/trellis/trellistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(trellistest.Servers(m)) }

// ran records the names the test action was called with; "fail" fails.
var (
	ranMu sync.Mutex
	ran   []string

	action = timedactions.Define("trellistest-action")
	record = timedactions.Method(action, "record",
		func(ctx *timedactions.Ctx, name string) timedactions.Effect {
			ranMu.Lock()
			ran = append(ran, name)
			ranMu.Unlock()
			if name == "fail" {
				return ctx.Error("refused")
			}
			return ctx.Done()
		})
)

func ranSoFar() []string {
	ranMu.Lock()
	defer ranMu.Unlock()
	return append([]string(nil), ran...)
}

// AdvanceTimers returns once every timer due by the new time has run and
// been recorded, and no later: on both stores, a timer due exactly then
// runs, one due a millisecond later does not, and a failed one is due
// again (kept, with its attempt counted).
func TestAdvanceTimers(t *testing.T) {
	stores := []struct {
		name string               // case name
		opts []trellistest.Option // the store
	}{
		{"memory", nil},
		{"redis", []trellistest.Option{trellistest.WithRedisURL(trellistest.RedisURL(t))}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			ranMu.Lock()
			ran = nil
			ranMu.Unlock()
			ts := trellistest.Start(t, func(h *trellis.Host, r chi.Router) error {
				_, err := action.Start(h.Client)
				return err
			}, st.opts...)
			ctx := context.Background()
			for _, tm := range []struct {
				name  string
				delay time.Duration
			}{{"on-time", time.Second}, {"fail", time.Second}, {"later", time.Second + time.Millisecond}} {
				call, err := record.Deferred(tm.name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ts.Host().Timers.Create(ctx, tm.name, tm.delay, call); err != nil {
					t.Fatal(err)
				}
			}
			ts.AdvanceTimers(t, time.Second)
			got := ranSoFar()
			if len(got) != 2 || !(got[0] == "on-time" && got[1] == "fail" || got[0] == "fail" && got[1] == "on-time") {
				t.Fatalf("ran %v, want on-time and fail only", got)
			}
			if _, err := ts.Host().Timers.Get(ctx, "on-time"); err == nil {
				t.Error("the timer that ran is still stored")
			}
			failed, err := ts.Host().Timers.Get(ctx, "fail")
			if err != nil || failed.Attempts != 1 || !failed.DueAt.After(ts.Clock.Now()) {
				t.Fatalf("the failed timer: %+v, %v; want it due again later after 1 attempt", failed, err)
			}
			ts.AdvanceTimers(t, time.Millisecond)
			if got := ranSoFar(); len(got) != 3 || got[2] != "later" {
				t.Fatalf("ran %v, want later third", got)
			}
			// The service still answers: the kit's HTTP side.
			if resp := ts.Get(t, "/healthz"); resp.Status != http.StatusOK {
				t.Fatalf("/healthz: %d", resp.Status)
			}
		})
	}
}
