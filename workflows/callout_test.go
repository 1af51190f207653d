package workflows_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Callout calls another system over HTTP in its step "call", which fails
// its first attempt after the call: the retry calls again.
type Callout struct {
	URL string `json:"url"`
}

var (
	Callouts = workflows.Define("callout", func(string) Callout { return Callout{} },
		workflows.Retries(1, time.Second, time.Second))

	StartCallout = workflows.Command(Callouts, "start",
		func(ctx *workflows.Ctx[Callout, components.Done], _ Callout, url string) workflows.Effect[Callout, components.Done] {
			return ctx.UpdateState(Callout{URL: url}).TransitionTo("call", nil).ThenReply(components.Done{})
		})

	calloutClient = &http.Client{Timeout: 5 * time.Second}
	// calloutKeys are the keys of the runs of "call", by workflow id.
	calloutKeys sync.Map
)

func init() {
	workflows.Step(Callouts, "call", func(ctx *workflows.StepCtx[Callout], s Callout, _ any) workflows.StepEffect[Callout] {
		calloutKeys.Store(ctx.WorkflowID(), ctx.IdempotencyKey())
		req, err := ctx.NewRequest(http.MethodPost, s.URL, nil)
		if err != nil {
			return ctx.Fail("%v", err)
		}
		resp, err := calloutClient.Do(req)
		if err != nil {
			return ctx.Fail("call: %v", err)
		}
		_ = resp.Body.Close()
		if ctx.Attempt() == 1 {
			return ctx.Fail("the first attempt fails after its call")
		}
		return ctx.End()
	})
}

// TestCallOutCarriesTheKey: a step's call out of Trellis carries the
// run's key (StepCtx.IdempotencyKey, which its entity commands carry) in
// its Idempotency-Key header, the same on its retry.
func TestCallOutCarriesTheKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	t.Cleanup(func() { calloutClient.CloseIdleConnections(); srv.Close() })
	e := start(t, Callouts, nil, nil)
	ctx := context.Background()
	if _, err := StartCallout.Invoke(ctx, e.client, "o-1", srv.URL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "o-1", "waiting for its retry", func(in workflows.Instance[Callout]) bool { return in.Attempt == 1 })
	e.clock.Advance(time.Second)
	waitFor(t, e, "o-1", "ended", status[Callout](workflows.StatusEnded))
	mu.Lock()
	defer mu.Unlock()
	key, _ := calloutKeys.Load("o-1")
	want, _ := key.(string)
	if want == "" || !slices.Equal(keys, []string{want, want}) {
		t.Errorf("the calls carried keys %q, want %q twice", keys, want)
	}
}
