package views_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

// versionedRow is a row of the rebuilt view: V says which updater made
// it.
type versionedRow struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
	V     int    `json:"v"`
}

// rebuiltView is the view "rebuilt-orders" as version v of the service
// defines it: version 2 doubles the totals, and adds a query.
func rebuiltView(v int) (*views.View[order, versionedRow], *views.Query[versionedRow]) {
	view := views.Define("rebuilt-orders", orders, func(c views.Change[order]) views.Update[versionedRow] {
		if c.Deleted || c.State.Status == "cancelled" {
			return views.Delete[versionedRow]()
		}
		return views.Upsert(versionedRow{ID: c.EntityID, Total: v * c.State.Total, V: v})
	}).Version(fmt.Sprint(v))
	all := view.Query("all", views.MaxLimit(100))
	if v == 2 {
		view.Query("by-total", views.Range("total"))
	}
	return view, all
}

func rebuiltApp(v int) (trellis.Setup, *views.Query[versionedRow]) {
	view, all := rebuiltView(v)
	return func(h *trellis.Host, _ chi.Router) error {
		if _, err := orders.Start(h.Entities()); err != nil {
			return err
		}
		return view.Start(h.Views())
	}, all
}

// TestViewRebuild: a service's view is given a new version (a new
// updater, one more query) while orders keep changing. The new instance
// builds the new generation from the orders' states while the old rows
// answer every query, then swaps it in; from then on every row is the
// new updater's, and the rows equal the orders' states exactly.
func TestViewRebuild(t *testing.T) {
	app1, _ := rebuiltApp(1)
	ts1 := trellistest.StartInstances(t, 1, app1)[0]
	trellistest.WaitSettled(t, ts1)
	rng := rand.New(rand.NewPCG(3, 3))
	var mu sync.Mutex
	states := make(map[string]order)
	write := func(ts *trellistest.Service) string {
		mu.Lock()
		defer mu.Unlock()
		id := fmt.Sprintf("r-%03d", rng.IntN(300))
		if rng.IntN(10) == 0 {
			delete(states, id)
			return remove(t, ts, id)
		}
		o := order{Customer: "c", Status: []string{"open", "open", "cancelled"}[rng.IntN(3)], Total: rng.IntN(1000)}
		states[id] = o
		return put(t, ts, id, o)
	}
	var positions []string
	for range 300 {
		positions = append(positions, write(ts1))
	}
	waitView(t, ts1, "rebuilt-orders", positions)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ts1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	app2, all2 := rebuiltApp(2)
	ts2 := trellistest.JoinInstance(t, ts1, app2)
	trellistest.WaitSettled(t, ts2)
	stop := make(chan struct{})
	wrote := make(chan string, 1)
	var last string
	stopWriter := sync.OnceFunc(func() { close(stop); last = <-wrote })
	t.Cleanup(stopWriter) // before ts2 stops, when the test fails early
	go func() {
		defer close(wrote)
		var last string
		for {
			select {
			case <-stop:
				wrote <- last
				return
			default:
				last = write(ts2)
			}
		}
	}()
	old, fresh := 0, 0
	for deadline := time.Now().Add(time.Minute); ; {
		p, err := all2.Page(ctx, ts2.Host().Views(), views.Request{Limit: 100})
		if err != nil {
			t.Fatalf("a query during the rebuild: %v", err)
		}
		if len(p.Rows) == 0 {
			t.Fatal("a query during the rebuild: no rows")
		}
		switch p.Rows[0].V {
		case 1:
			if fresh > 0 {
				t.Fatal("the old rows answered after the new ones")
			}
			old++
		case 2:
			fresh++
		}
		done, err := ts2.Host().Views().Rebuilt(ctx, "rebuilt-orders")
		if err != nil {
			t.Fatal(err)
		}
		if done && fresh > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new generation was not swapped in within a minute")
		}
	}
	stopWriter()
	t.Logf("during the rebuild: %d pages of the old rows, then %d of the new", old, fresh)
	mu.Lock()
	defer mu.Unlock()
	waitView(t, ts2, "rebuilt-orders", []string{last})
	got := make(map[string]versionedRow)
	req := views.Request{Limit: 100}
	for {
		p, err := all2.Page(ctx, ts2.Host().Views(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range p.Rows {
			got[row.ID] = row
		}
		if p.Next == "" {
			break
		}
		req.Token = p.Next
	}
	want := 0
	for id, o := range states {
		if o.Status == "cancelled" {
			continue
		}
		want++
		if row, ok := got[id]; !ok || row != (versionedRow{ID: id, Total: 2 * o.Total, V: 2}) {
			t.Errorf("%s: row %+v (listed %t), want total %d of version 2", id, row, ok, 2*o.Total)
		}
	}
	if len(got) != want {
		t.Errorf("%d rows, want %d", len(got), want)
	}

	// An instance that still runs the old code (a rolling deploy) does
	// not swap the old generation back in.
	ts3 := trellistest.JoinInstance(t, ts1, app1)
	for deadline := time.Now().Add(3 * swapPeriod); time.Now().Before(deadline); time.Sleep(swapPeriod / 10) {
		for _, ts := range []*trellistest.Service{ts2, ts3} {
			st, err := ts.Host().Views().Statuses(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st) != 1 || st[0].Answering != (ts == ts2) {
				t.Fatalf("statuses %+v on the %s instance: the new generation must answer", st, map[bool]string{true: "new", false: "old"}[ts == ts2])
			}
		}
	}
}

// swapPeriod is how often a runner looks for a generation to swap in.
const swapPeriod = time.Second

// waitView waits until view applied every position, on ts.
func waitView(t testing.TB, ts *trellistest.Service, view string, positions []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for _, text := range positions {
		pos, err := views.ParsePosition(text)
		if err == nil {
			err = ts.Host().Views().WaitFor(ctx, view, pos)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
