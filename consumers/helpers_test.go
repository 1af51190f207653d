package consumers_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(trellistest.Servers(m)) }

// seen is what a test consumer saw of one counter: its values in the
// order handled (-1 for a deletion).
type recorder struct {
	mu     sync.Mutex
	seen   map[string][]int64
	poison map[string]bool // handled with an error while set
	calls  int
}

func newRecorder() *recorder {
	return &recorder{seen: make(map[string][]int64), poison: make(map[string]bool)}
}

// handle is the test consumer's handler: a method value, the way a
// consumer gets its dependencies.
func (r *recorder) handle(ctx *consumers.Ctx, c consumers.Change[counter.Counter]) consumers.Effect {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.poison[c.EntityID] {
		return ctx.Error("counter %s is poison", c.EntityID)
	}
	v := c.State.Value
	if c.Deleted {
		v = -1
	}
	r.seen[c.EntityID] = append(r.seen[c.EntityID], v)
	return ctx.Done()
}

func (r *recorder) values(id string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen[id])
}

func (r *recorder) setPoison(id string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.poison[id] = on
}

// app is a setup with the counter entity and a consumer of its changes
// that records into rec.
func app(rec *recorder, opts ...consumers.Option) trellis.Setup {
	return func(h *trellis.Host, _ chi.Router) error {
		if _, err := counter.Entity.Start(h.Entities()); err != nil {
			return err
		}
		_, err := consumers.Define("counter-log", counter.Entity, rec.handle, opts...).Start(h.Consumers())
		return err
	}
}

// increase increases counter id by one through ts's client.
func increase(t testing.TB, ts *trellistest.Service, id string) int64 {
	t.Helper()
	c, err := counter.Increase.Invoke(context.Background(), ts.Host().Client, id, 1)
	if err != nil {
		t.Fatalf("increase %s: %v", id, err)
	}
	return c.Value
}

// remove deletes counter id.
func remove(t testing.TB, ts *trellistest.Service, id string) {
	t.Helper()
	if _, err := counter.Delete.Invoke(context.Background(), ts.Host().Client, id, components.Done{}); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
}

// wantSeen fails unless the consumer saw exactly want for id.
func wantSeen(t testing.TB, rec *recorder, id string, want ...int64) {
	t.Helper()
	if got := rec.values(id); !slices.Equal(got, want) {
		t.Fatalf("consumer saw %s as %v, want %v", id, got, want)
	}
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c-%d", i)
	}
	return out
}

// waitCalls waits until the handler was called n times.
func (r *recorder) waitCalls(t testing.TB, n int) {
	t.Helper()
	trellistest.Eventually(t, 10*time.Second, fmt.Sprintf("%d handler calls", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.calls >= n
	})
}

// checkSeen checks what a consumer saw of counter id (seen, in the order
// handled) against its final value: every value from 1 to final, in
// order; a value seen again only in a replay, which starts over from a
// checkpoint (below the value seen last) and goes up one by one. It
// returns how many values were seen again.
func checkSeen(t testing.TB, id string, seen []int64, final int64) (duplicates int) {
	t.Helper()
	highest := int64(0)
	for j, v := range seen {
		switch {
		case v == highest+1:
			highest = v
		case v <= highest && (j == 0 || v == seen[j-1]+1 || v <= seen[j-1]):
			duplicates++ // a replay from a checkpoint
		default:
			t.Fatalf("%s seen as %v: %d out of order", id, seen, v)
		}
	}
	if highest != final {
		t.Fatalf("%s seen as %v: up to %d, want every value up to %d", id, seen, highest, final)
	}
	return duplicates
}
