package views_test

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// TestViewStream follows a query over HTTP with an SSE client: the rows
// first, then the changes as orders are added, changed, moved out of the
// result and removed; the client disconnects, more changes are made, and
// it resumes with its Last-Event-ID. The client's rows must equal the
// orders' at each step, with no reset (no gap the stream could not tell)
// and no change seen twice. The service's request timeout is short, so
// streams also end on their own and the client resumes them.
func TestViewStream(t *testing.T) {
	short := trellistest.WithConfig(func(c *trellis.Config) { c.RequestTimeout = 3 * time.Second })
	starts := []struct {
		name  string
		start func(t *testing.T) *trellistest.Service
	}{
		{"memory", func(t *testing.T) *trellistest.Service { return trellistest.Start(t, app, short) }},
		{"redis", func(t *testing.T) *trellistest.Service {
			ts := trellistest.StartInstances(t, 1, app, short)[0]
			trellistest.WaitSettled(t, ts)
			return ts
		}},
		{"redis-cluster", func(t *testing.T) *trellistest.Service {
			prefix := "trellis-test-" + rand.Text()
			client := testenv.RedisCluster(t)
			t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
			url := testenv.RedisClusterURL(t)
			ts := trellistest.Start(t, app, short, trellistest.WithStorePrefix(prefix),
				trellistest.WithConfig(func(c *trellis.Config) { c.RedisClusterURL = url }))
			trellistest.WaitSettled(t, ts)
			return ts
		}},
	}
	for _, st := range starts {
		t.Run(st.name, func(t *testing.T) {
			ts := st.start(t)
			rng := mrand.New(mrand.NewPCG(7, 7))
			states := make(map[string]order)
			var positions []string
			write := func() {
				id := fmt.Sprintf("s-%02d", rng.IntN(40))
				if rng.IntN(8) == 0 {
					delete(states, id)
					positions = append(positions, remove(t, ts, id))
					return
				}
				o := order{Customer: []string{"c0", "c1"}[rng.IntN(2)], Status: []string{"open", "paid", "cancelled"}[rng.IntN(3)], Created: rng.Int64N(1000), Total: rng.IntN(100)}
				states[id] = o
				positions = append(positions, put(t, ts, id, o))
			}
			want := func() map[string]orderRow {
				rows := make(map[string]orderRow)
				for id, o := range states {
					if o.Customer == "c0" && o.Status == "open" {
						rows[id] = orderRow{ID: id, Customer: o.Customer, Status: o.Status, Created: o.Created, Total: o.Total}
					}
				}
				return rows
			}
			for range 30 {
				write()
			}
			// Every shard is built before the stream reads the rows: a
			// shard's first build after that would be a reset.
			caughtUp(t, ts, positions...)
			trellistest.Eventually(t, waitLong, "the view built on every shard", func() bool {
				built, err := ts.Host().Views().Built(t.Context(), orderView.Name())
				if err != nil {
					t.Fatal(err)
				}
				return built
			})
			const path = "/orders/stream?customer=c0&status=open"
			c := newClient()
			f := follow(t, ts, path, "")
			c.until(t, f, want(), false)
			for round := range 3 {
				for range 20 {
					write()
				}
				c.until(t, f, want(), false)
				f.stop()
				for range 20 {
					write()
				}
				f = follow(t, ts, path, f.lastID)
				c.until(t, f, want(), false)
				t.Logf("round %d: %d rows", round, len(c.rows))
			}
			// The server ends a stream before the request timeout: the
			// client resumes it, and misses nothing meanwhile.
			deadline := time.Now().Add(waitLong)
			for f.ends.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the server did not end the stream before its request timeout")
				}
				select {
				case ev := <-f.events:
					c.apply(t, ev, false)
				case <-time.After(50 * time.Millisecond):
				}
			}
			for range 20 {
				write()
			}
			c.until(t, f, want(), false)
		})
	}
}
