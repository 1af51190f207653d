package trellis_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

// increaseAll sends POST increase {"by":1} from goroutines×perGoroutine
// concurrent requests; pick chooses the service and counter id of the i-th
// request of goroutine g. It returns each id's replied values.
func increaseAll(t *testing.T, goroutines, perGoroutine int, pick func(g, i int) (*trellistest.Service, string)) map[string][]int64 {
	t.Helper()
	var (
		mu      sync.Mutex
		replies = make(map[string][]int64)
		wg      sync.WaitGroup
		errs    = make(chan error, goroutines)
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				ts, id := pick(g, i)
				resp, err := ts.Call(context.Background(), http.MethodPost, "/counters/"+id+"/increase", map[string]int{"by": 1})
				if err == nil && resp.Status != http.StatusOK {
					err = fmt.Errorf("POST %s: status %d: %s", id, resp.Status, resp.Body)
				}
				if err != nil {
					errs <- err
					return
				}
				var c contract.Counter
				if err := jsonUnmarshal(resp.Body, &c); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				replies[id] = append(replies[id], c.Value)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return replies
}

// checkSerial fails unless the replies of one id are exactly 1..n: every
// increase saw every earlier one, so none was lost or applied twice.
func checkSerial(t *testing.T, id string, replies []int64, n int) {
	t.Helper()
	got := slices.Clone(replies)
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("counter %s: replies sorted %v…, want 1..%d each once", id, got[:min(len(got), 20)], n)
		}
	}
	if len(got) != n {
		t.Fatalf("counter %s: %d replies, want %d", id, len(got), n)
	}
}

// TestOneAtATimePerID: 50 goroutines × 20 concurrent POSTs increase by 1;
// each id's commands run one at a time, so the final values are exact and
// the replies of one id are 1..n, each once.
func TestOneAtATimePerID(t *testing.T) {
	const goroutines, perGoroutine = 50, 20
	tests := []struct {
		name string // case name
		ids  int    // how many counter ids the requests spread over
	}{
		{name: "one id", ids: 1},
		{name: "ten ids", ids: 10},
	}
	for _, sc := range fixture.Stores {
		for _, tt := range tests {
			t.Run(sc.Name+"/"+tt.name, func(t *testing.T) {
				ts := fixture.StartCounter(t, &fixture.CounterApp{}, sc.Opts(t)...)
				replies := increaseAll(t, goroutines, perGoroutine, func(g, i int) (*trellistest.Service, string) {
					return ts, fmt.Sprintf("serial-%d", (g+i)%tt.ids)
				})
				want := goroutines * perGoroutine / tt.ids
				for n := range tt.ids {
					id := fmt.Sprintf("serial-%d", n)
					checkSerial(t, id, replies[id], want)
					if c := fixture.Counter(t, ts.Get(t, "/counters/"+id)); c.Value != int64(want) {
						t.Errorf("counter %s = %d, want %d", id, c.Value, want)
					}
				}
			})
		}
	}
}

// TestTwoInstancesOnOneRedis: two services on one Redis and one key prefix
// update one counter concurrently, the requests alternating between them.
// Each holds the entity in memory, so each write may conflict with the
// other's; the store's compare-and-set makes the loser reload and run the
// command again, so no update is lost, and a read through either service
// sees the other's last write.
func TestTwoInstancesOnOneRedis(t *testing.T) {
	url := trellistest.RedisURL(t)
	prefix := sharedPrefix(t)
	// Conflicts are what this test is about: let a command survive many in
	// a row, so that the outcome does not hang on scheduling luck.
	opts := []trellistest.Option{trellistest.WithRedisURL(url), trellistest.WithStorePrefix(prefix)}
	a := fixture.StartCounter(t, &fixture.CounterApp{MaxConflicts: 1000}, opts...)
	b := fixture.StartCounter(t, &fixture.CounterApp{MaxConflicts: 1000}, opts...)
	both := []*trellistest.Service{a, b}
	// A command that conflicts again and again pauses on its service's
	// clock before it retries.
	trellistest.KeepClocksMoving(t, a.Clock, b.Clock)

	t.Run("concurrent increases", func(t *testing.T) {
		const goroutines, perGoroutine = 8, 25
		replies := increaseAll(t, goroutines, perGoroutine, func(g, i int) (*trellistest.Service, string) {
			return both[(g+i)%2], "shared"
		})
		checkSerial(t, "shared", replies["shared"], goroutines*perGoroutine)
		for i, ts := range both {
			if c := fixture.Counter(t, ts.Get(t, "/counters/shared")); c.Value != goroutines*perGoroutine {
				t.Errorf("instance %d reads %d, want %d", i, c.Value, goroutines*perGoroutine)
			}
		}
	})

	t.Run("reads see the other instance's writes", func(t *testing.T) {
		var want int64
		for i := range 10 {
			writer, reader := both[i%2], both[(i+1)%2]
			want++
			if c := fixture.Counter(t, writer.Post(t, "/counters/fresh/increase", map[string]int{"by": 1})); c.Value != want {
				t.Fatalf("write %d: value %d, want %d", i, c.Value, want)
			}
			if c := fixture.Counter(t, reader.Get(t, "/counters/fresh")); c.Value != want {
				t.Fatalf("read %d through the other instance: value %d, want %d", i, c.Value, want)
			}
		}
		// A delete through one is seen by the other too.
		if c := fixture.Counter(t, a.Delete(t, "/counters/fresh")); c.Value != want {
			t.Fatalf("delete replied %d, want the last state %d", c.Value, want)
		}
		if c := fixture.Counter(t, b.Get(t, "/counters/fresh")); c.Value != 0 {
			t.Fatalf("read after delete through the other instance: %d, want 0", c.Value)
		}
	})
}
