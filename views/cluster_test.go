package views_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

// TestViewReadYourWritesAcrossInstances: an order written through one
// instance is in a page read through another that waits for the write's
// position, with the state written; a page token made on one instance
// goes on on the other.
func TestViewReadYourWritesAcrossInstances(t *testing.T) {
	instances := trellistest.StartInstances(t, 2, app)
	trellistest.WaitSettled(t, instances...)
	for i := range 20 {
		writer, reader := instances[i%2], instances[(i+1)%2]
		id := fmt.Sprintf("y-%02d", i)
		o := order{Customer: "cust-" + id, Status: "open", Created: int64(i), Total: i}
		pos := put(t, writer, id, o)
		p, err := byCustomer.Page(context.Background(), reader.Host().Views(), views.Request{
			Params: map[string]string{"customer": o.Customer, "status": "open"}, After: pos, Wait: waitLong})
		if err != nil {
			t.Fatalf("read %s through the other instance: %v", id, err)
		}
		want := orderRow{ID: id, Customer: o.Customer, Status: "open", Created: o.Created, Total: o.Total}
		if len(p.Rows) != 1 || p.Rows[0] != want {
			t.Fatalf("read %s through the other instance: %+v, want [%+v]", id, p.Rows, want)
		}
	}
	var rows []orderRow
	req := views.Request{Limit: 3}
	for i := 0; ; i++ {
		p, err := all.Page(context.Background(), instances[i%2].Host().Views(), req)
		if err != nil {
			t.Fatalf("page %d through instance %d: %v", i, i%2, err)
		}
		rows = append(rows, p.Rows...)
		if p.Next == "" {
			break
		}
		req.Token = p.Next
	}
	if len(rows) != 20 {
		t.Fatalf("%d rows paged through both instances, want 20", len(rows))
	}
}

// TestViewKillConverges: three instances take writes to many orders while
// a client follows a query through one of them; another is killed (no
// goodbye: its shards, and the projectors of its shards, move to the
// others once its lease lapses) mid-stream. Then the view's rows equal
// the orders' states exactly (every row compared), the follower's rows
// equal the query's result, and the follower resumes through another
// instance with its last event id, with no gap and no change twice.
func TestViewKillConverges(t *testing.T) {
	testenv.Long(t)
	const ids, writes, writers = 100, 1500, 4
	opts := []trellistest.Option{trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) {
			c.ClusterLease = 3 * time.Second
			c.RequestTimeout = 4 * time.Second
		})}
	instances := trellistest.StartInstances(t, 3, app, opts...)
	trellistest.WaitSettled(t, instances...)
	alive := []*trellistest.Service{instances[0], instances[2]}

	const path = "/orders/stream?customer=c0&status=open"
	c := newClient()
	f := follow(t, instances[2], path, "")
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for done.Load() < writes {
				id := fmt.Sprintf("k-%03d", rng.IntN(ids))
				through := instances[rng.IntN(3)]
				if done.Load() > writes/3 {
					through = alive[rng.IntN(2)]
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var err error
				if rng.IntN(10) == 0 {
					_, err = removeOrder.Invoke(ctx, through.Host().Client, id, components.Done{})
				} else {
					o := order{Customer: []string{"c0", "c1"}[rng.IntN(2)], Status: []string{"open", "paid", "cancelled"}[rng.IntN(3)], Created: rng.Int64N(1000), Total: rng.IntN(100)}
					_, err = putOrder.Invoke(ctx, through.Host().Client, id, o)
				}
				cancel()
				if err != nil {
					failed.Add(1) // it may have been applied: the final states say
					time.Sleep(20 * time.Millisecond)
					continue
				}
				done.Add(1)
			}
		})
	}
	drain := func(until func() bool, what string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !until() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 2 minutes", what)
			}
			select {
			case ev := <-f.events:
				c.apply(t, ev, false)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	drain(func() bool { return done.Load() >= writes/3 }, "a third of the writes")
	instances[1].Kill()
	drain(func() bool { return done.Load() >= writes }, "the writes")
	wg.Wait()
	trellistest.WaitSettled(t, alive...)
	t.Logf("%d writes (%d failed and were tried again), one instance killed after %d", done.Load(), failed.Load(), writes/3)

	// Every row compared with its order's state, read back.
	want := make(map[string]orderRow)
	for i := range ids {
		id := fmt.Sprintf("k-%03d", i)
		o, err := getOrder.Invoke(context.Background(), alive[0].Host().Client, id, components.Done{})
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if o.Customer != "" && o.Status != "cancelled" {
			want[id] = orderRow{ID: id, Customer: o.Customer, Status: o.Status, Created: o.Created, Total: o.Total}
		}
		caughtUp(t, alive[0], written(t, alive[0], id))
	}
	got := make(map[string]orderRow)
	for _, row := range pageAll(t, alive[0], all, views.Request{Limit: 50}) {
		got[row.ID] = row
	}
	if !equalRows(got, want) {
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: row %+v, want %+v", id, got[id], w)
			}
		}
		for id, g := range got {
			if _, ok := want[id]; !ok {
				t.Errorf("%s: row %+v, want none", id, g)
			}
		}
		t.FailNow()
	}
	followed := make(map[string]orderRow)
	for id, row := range want {
		if row.Customer == "c0" && row.Status == "open" {
			followed[id] = row
		}
	}
	c.until(t, f, followed, false)
	f.stop()
	f = follow(t, alive[0], path, f.lastID)
	put(t, alive[0], "k-new", order{Customer: "c0", Status: "open", Total: 1})
	followed["k-new"] = orderRow{ID: "k-new", Customer: "c0", Status: "open", Total: 1}
	c.until(t, f, followed, false)
}
