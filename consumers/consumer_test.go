package consumers_test

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

// TestConsumerEmbedded: on the embedded store, a consumer gets every
// change of its entity type, in order per entity, deletions included,
// once each.
func TestConsumerEmbedded(t *testing.T) {
	rec := newRecorder()
	ts := trellistest.Start(t, app(rec))
	for range 3 {
		for _, id := range ids(5) {
			increase(t, ts, id)
		}
	}
	remove(t, ts, "c-0")
	ts.WaitConsumers(t)
	wantSeen(t, rec, "c-0", 1, 2, 3, -1)
	for _, id := range ids(5)[1:] {
		wantSeen(t, rec, id, 1, 2, 3)
	}
}

// TestConsumerRefusedOnRedisWithoutCluster: on Redis with the cluster
// mode off, the store keeps no change log, and starting a consumer fails
// the service's setup with an error that says what to do.
func TestConsumerRefusedOnRedisWithoutCluster(t *testing.T) {
	cfg := trellis.DefaultConfig()
	cfg.RedisURL, cfg.RedisPrefix = trellistest.RedisURL(t), "trellis-test-"+rand.Text()
	cfg.ClusterAddr = trellis.ClusterOff
	svc, err := trellis.New(cfg, app(newRecorder()), trellis.WithLogger(slog.New(slog.DiscardHandler)))
	if err == nil {
		_ = svc.Shutdown(t.Context())
	}
	if err == nil || !strings.Contains(err.Error(), "TRELLIS_CLUSTER_ADDR") {
		t.Fatalf("start: %v, want a refusal naming TRELLIS_CLUSTER_ADDR", err)
	}
}

// TestEveryChangeAfterAFailure: while an entity's change is retried, its
// later changes wait; once the retry succeeds the handler gets each of
// them in order, the deletion and the new life included. A consumer that
// coalesces gets the latest state only.
func TestEveryChangeAfterAFailure(t *testing.T) {
	tests := []struct {
		name string
		opts []consumers.Option
		want []int64
	}{
		{"every change (the default)", nil, []int64{1, 2, 3, -1, 1}},
		{"coalescing", []consumers.Option{consumers.WithCoalescing()}, []int64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			rec.setPoison("bad", true)
			ts := trellistest.Start(t, app(rec, tt.opts...))
			increase(t, ts, "bad")
			rec.waitCalls(t, 1) // failed: retried in 3 s
			increase(t, ts, "bad")
			increase(t, ts, "bad")
			remove(t, ts, "bad")
			increase(t, ts, "bad")
			increase(t, ts, "good") // another entity goes on meanwhile
			trellistest.Eventually(t, 10*time.Second, "good to be handled", func() bool { return len(rec.values("good")) == 1 })
			wantSeen(t, rec, "bad")
			rec.setPoison("bad", false)
			ts.Clock.Advance(3 * time.Second)
			ts.WaitConsumers(t)
			wantSeen(t, rec, "bad", tt.want...)
		})
	}
}

// TestPoisonChange, on the embedded store and on Redis (a cluster of
// one), for a consumer that coalesces: a change whose handler fails is
// retried with the timers' backoff
// (3 s, then 6 s) while the other entities go on; after its last retry it
// becomes a dead letter and its entity goes on; the admin API lists it,
// and its retry fails (409) while the handler does, and handles it (204)
// once the handler is fixed.
func TestPoisonChange(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			rec := newRecorder()
			rec.setPoison("bad", true)
			setup := app(rec, consumers.WithMaxRetries(2), consumers.WithCoalescing())
			token := trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = adminToken })
			var ts *trellistest.Service
			if store == "memory" {
				ts = trellistest.Start(t, setup, token)
			} else {
				ts = trellistest.StartInstances(t, 1, setup, token)[0]
				trellistest.WaitSettled(t, ts)
			}
			testPoisonChange(t, ts, rec)
		})
	}
}

const adminToken = "test-admin-token-0123456789abcdef"

func testPoisonChange(t *testing.T, ts *trellistest.Service, rec *recorder) {
	increase(t, ts, "bad")
	increase(t, ts, "good")
	trellistest.Eventually(t, 10*time.Second, "good to be handled", func() bool { return len(rec.values("good")) == 1 })
	increase(t, ts, "bad") // coalesced into the pending change
	increase(t, ts, "good")
	trellistest.Eventually(t, 10*time.Second, "good's next change", func() bool { return len(rec.values("good")) == 2 })

	runner := ts.Host().Consumers()
	for i, wait := range []time.Duration{3 * time.Second, 6 * time.Second} {
		// bad failed once, good twice handled, then one call per retry.
		rec.waitCalls(t, 3+i)
		if behind, err := runner.Behind(t.Context()); err != nil || behind == 0 {
			t.Fatalf("behind %d (%v) while bad is retried, want > 0", behind, err)
		}
		ts.Clock.Advance(wait)
	}
	ts.WaitConsumers(t) // the change is a dead letter: handled
	var dead []adminapi.ConsumerDeadLetter
	adminCall(t, ts, http.MethodGet, "/admin/consumers/counter-log/dead-letters", http.StatusOK).JSON(t, &dead)
	if len(dead) != 1 {
		t.Fatalf("dead letters %+v, want bad's", dead)
	}
	if d := dead[0]; d.EntityId != "bad" || d.Attempts != 3 || !strings.Contains(d.Error, "poison") || string(d.State) != `{"id":"bad","value":2}` {
		t.Fatalf("dead letter %+v, want bad at value 2 after 3 attempts", d)
	}
	var list []adminapi.Consumer
	adminCall(t, ts, http.MethodGet, "/admin/consumers", http.StatusOK).JSON(t, &list)
	if len(list) != 1 || list[0].Id != "counter-log" || list[0].DeadLetters != 1 || list[0].LagChanges != 0 {
		t.Fatalf("consumers %+v, want counter-log with its dead letter and no lag", list)
	}
	wantSeen(t, rec, "bad")

	increase(t, ts, "bad") // the entity goes on
	rec.waitCalls(t, 6)
	adminCall(t, ts, http.MethodPost, "/admin/consumers/counter-log/dead-letters/bad/retry", http.StatusConflict)
	rec.setPoison("bad", false)
	ts.Clock.Advance(3 * time.Second)
	ts.WaitConsumers(t)
	wantSeen(t, rec, "bad", 3)
	adminCall(t, ts, http.MethodPost, "/admin/consumers/counter-log/dead-letters/bad/retry", http.StatusNoContent)
	wantSeen(t, rec, "bad", 3, 2)
	adminCall(t, ts, http.MethodDelete, "/admin/consumers/counter-log/dead-letters/bad", http.StatusNotFound)
	adminCall(t, ts, http.MethodGet, "/admin/consumers/nobody/dead-letters", http.StatusNotFound)
}

// adminCall sends an admin request with the token and checks its status.
func adminCall(t *testing.T, ts *trellistest.Service, method, path string, want int) *trellistest.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := ts.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.Status, resp.Body, want)
	}
	return resp
}

// TestConsumersAreIndependent: two consumers of one entity type each get
// every change; one's failing entity holds back neither the other's nor
// its own other entities; the lag series are on /metrics.
func TestConsumersAreIndependent(t *testing.T) {
	sound, failing := newRecorder(), newRecorder()
	failing.setPoison("c-1", true)
	ts := trellistest.Start(t, func(h *trellis.Host, r chi.Router) error {
		if err := app(sound)(h, r); err != nil {
			return err
		}
		_, err := consumers.Define("counter-audit", counter.Entity, failing.handle).Start(h.Consumers())
		return err
	})
	for _, id := range ids(3) {
		increase(t, ts, id)
	}
	trellistest.Eventually(t, 10*time.Second, "both consumers to handle c-0 and c-2", func() bool {
		return len(sound.values("c-0"))+len(sound.values("c-1"))+len(sound.values("c-2"))+
			len(failing.values("c-0"))+len(failing.values("c-2")) == 5
	})
	wantSeen(t, failing, "c-1")
	metrics := string(ts.Get(t, "/metrics").Body)
	for _, want := range []string{
		`trellis_consumer_lag_changes{consumer="counter-audit"} 1`,
		`trellis_consumer_lag_changes{consumer="counter-log"} 0`,
		`trellis_consumer_changes_total{consumer="counter-audit",outcome="failed"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", metrics)
	}
}

// TestHandlerCreatesTimers: a handler creates a timer through
// ctx.Timers(), the service's scheduler, named after the change.
func TestHandlerCreatesTimers(t *testing.T) {
	ts := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) error {
		if _, err := counter.Entity.Start(h.Entities()); err != nil {
			return err
		}
		_, err := consumers.Define("counter-follow-up", counter.Entity, func(ctx *consumers.Ctx, c consumers.Change[counter.Counter]) consumers.Effect {
			call, err := counter.Increase.Deferred("follow-up", 1)
			if err != nil {
				return ctx.Error("%v", err)
			}
			name := fmt.Sprintf("follow-up-%s-%d", c.EntityID, c.Revision)
			if _, err := ctx.Timers().Create(ctx.Context(), name, time.Hour, call); err != nil {
				return ctx.Error("create timer %s: %v", name, err)
			}
			return ctx.Done()
		}).Start(h.Consumers())
		return err
	})
	increase(t, ts, "c-1")
	ts.WaitConsumers(t)
	if _, err := ts.Host().Timers.Get(t.Context(), "follow-up-c-1-1"); err != nil {
		t.Fatalf("the handler's timer: %v", err)
	}
}
