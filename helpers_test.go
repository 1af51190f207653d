package trellis_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

// counterApp is the application the tests run: the counter sample, with
// knobs for passivation and conflicts, and hooks that make handlers panic
// or block so that tests can reach the paths real handlers never take.
type counterApp struct {
	passivateAfter time.Duration // entities.Host.PassivateAfter (0: default)
	maxConflicts   int           // entities.Host.MaxConflicts (0: default)

	// panicID: GET /counters/{panicID} panics.
	panicID string
	// blockID: POST /counters/{blockID}/increase closes entered, then waits
	// for release before it runs the command.
	blockID string
	// stallID: POST /counters/{stallID}/increase waits for the request's
	// context to end (the request timeout) before it runs the command.
	stallID  string
	entered  chan struct{}
	release  chan struct{}
	running  *entities.Running[counter.Counter] // set by setup
	hostSeen *trellis.Host                      // set by setup
}

// setup is the trellis.Setup of the tests: the counter's routes, from
// the samples' contract, mounted on the service's router.
func (a *counterApp) setup(h *trellis.Host, r chi.Router) error {
	eh := h.Entities()
	eh.PassivateAfter = a.passivateAfter
	eh.MaxConflicts = a.maxConflicts
	running, err := counter.Entity.Start(eh)
	if err != nil {
		return err
	}
	a.running, a.hostSeen = running, h
	contract.HandlerWithOptions(&testAPI{Endpoint: counter.NewEndpoint(h.Client), app: a},
		contract.ChiServerOptions{BaseRouter: r, ErrorHandlerFunc: api.WriteParamError})
	return nil
}

// testAPI is the counter endpoint with the hooks of counterApp. The order
// routes answer 501 through the embedded fallback: it is one level
// deeper than the counter's methods, so those win.
type testAPI struct {
	*counter.Endpoint
	fallback
	app *counterApp
}

type fallback struct{ contract.Unimplemented }

func (t *testAPI) GetCounter(w http.ResponseWriter, r *http.Request, id contract.CounterID) {
	if t.app.panicID != "" && id == t.app.panicID {
		panic("boom: secret internal detail")
	}
	t.Endpoint.GetCounter(w, r, id)
}

func (t *testAPI) IncreaseCounter(w http.ResponseWriter, r *http.Request, id contract.CounterID) {
	if t.app.blockID != "" && id == t.app.blockID {
		close(t.app.entered)
		<-t.app.release
	}
	if t.app.stallID != "" && id == t.app.stallID {
		<-r.Context().Done()
	}
	t.Endpoint.IncreaseCounter(w, r, id)
}

// start boots a test service running the counter app.
func start(t testing.TB, app *counterApp, opts ...trellistest.Option) *trellistest.Service {
	t.Helper()
	return trellistest.Start(t, app.setup, opts...)
}

// storeCase is one state store the tests run against.
type storeCase struct {
	name  string                                  // subtest name
	store func(t testing.TB) []trellistest.Option // options selecting the store
}

// stores are the two stores: the embedded one and Redis (never skipped).
var stores = []storeCase{
	{name: "memory", store: func(testing.TB) []trellistest.Option { return nil }},
	{name: "redis", store: func(t testing.TB) []trellistest.Option {
		return []trellistest.Option{trellistest.WithRedisURL(trellistest.RedisURL(t))}
	}},
}

// counterOf decodes a 200 counter reply.
func counterOf(t testing.TB, resp *trellistest.Response) contract.Counter {
	t.Helper()
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", resp.Status, resp.Body)
	}
	var c contract.Counter
	resp.JSON(t, &c)
	return c
}

// sharedPrefix is a Redis key prefix for services that share state; its
// keys are removed when the test ends.
func sharedPrefix(t testing.TB) string {
	t.Helper()
	prefix := "trellis-test-shared-" + rand.Text()
	rdb := trellistest.Redis(t) // closed at cleanup, after the deletion below
	t.Cleanup(func() {
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, prefix+":*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("remove the keys under %s: %v", prefix, err)
		}
	})
	return prefix
}

// eventually polls cond every millisecond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond)
	}
}

// refused reports whether a new TCP connection to addr is refused.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %q: %w", b, err)
	}
	return nil
}
