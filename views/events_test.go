package views_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/eventsourced"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

// purse is the tests' event-sourced entity: a balance moved by events.
type purse struct {
	Balance int `json:"balance"`
}

type paidIn struct {
	Amount int `json:"amount"`
}

type paidOut struct {
	Amount int `json:"amount"`
}

var purses = eventsourced.Define("view-test-purse", func(string) purse { return purse{} },
	func(p purse, e any) purse {
		switch e := e.(type) {
		case paidIn:
			p.Balance += e.Amount
		case paidOut:
			p.Balance -= e.Amount
		}
		return p
	})

func init() {
	eventsourced.Event[paidIn](purses, "paid-in")
	eventsourced.Event[paidOut](purses, "paid-out")
}

var pay = eventsourced.Command(purses, "pay",
	func(ctx *eventsourced.Ctx[purse, int], _ purse, amount int) eventsourced.Effect[purse, int] {
		if amount < 0 {
			return ctx.Persist(paidOut{Amount: -amount}).ThenReply(func(p purse) int { return p.Balance })
		}
		return ctx.Persist(paidIn{Amount: amount}).ThenReply(func(p purse) int { return p.Balance })
	})

// purseRow is the row of the view over the purses' events: the balance
// and the number of events, folded from the events.
type purseRow struct {
	Balance int `json:"balance"`
	Events  int `json:"events"`
}

var (
	purseView = views.DefineEvents("test-purses", purses, func(e views.EntityEvent[purseRow]) views.Update[purseRow] {
		if e.Deleted {
			return views.Delete[purseRow]()
		}
		var row purseRow
		if e.Row != nil {
			row = *e.Row
		}
		switch ev := e.Event.(type) {
		case paidIn:
			row.Balance += ev.Amount
		case paidOut:
			row.Balance -= ev.Amount
		}
		row.Events++
		return views.Upsert(row)
	})
	pursesByBalance = purseView.Query("by-balance", views.Range("balance"))
)

func pursesApp(h *trellis.Host, _ chi.Router) error {
	_, err := purses.Start(h.Entities())
	return err
}

// TestViewOfEvents: a view over an event-sourced entity type's events,
// started once the purses have events (so it is built by folding their
// journals), then fed by the change log as more come: every row equals
// the fold of its purse's events, on the embedded store and on Redis
// (the cluster mode).
func TestViewOfEvents(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *trellistest.Service
	}{
		{"memory", func(t *testing.T) *trellistest.Service { return trellistest.Start(t, pursesApp) }},
		{"redis", func(t *testing.T) *trellistest.Service {
			ts := trellistest.StartInstances(t, 1, pursesApp)[0]
			trellistest.WaitSettled(t, ts)
			return ts
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.start(t)
			ctx := context.Background()
			want := make(map[string]purseRow)
			payAll := func(round int) {
				for i := range 6 {
					id := fmt.Sprintf("p-%d", i)
					amount := (i+1)*10 - round*7
					if _, err := pay.Invoke(ctx, ts.Host().Client, id, amount); err != nil {
						t.Fatal(err)
					}
					want[id] = purseRow{Balance: want[id].Balance + amount, Events: want[id].Events + 1}
				}
			}
			payAll(0)
			payAll(1)
			if err := purseView.Start(ts.Host().Views()); err != nil {
				t.Fatal(err)
			}
			payAll(2)
			var got map[string]purseRow
			for deadline := time.Now().Add(waitLong); ; {
				got = readPurses(t, ts)
				if maps.Equal(got, want) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the view's rows\n%v\nwant the fold of the events\n%v", got, want)
				}
				<-time.After(20 * time.Millisecond) // a bounded poll: the view is built, then fed, in the background
			}
		})
	}
}

// readPurses reads every page of the purses by balance, checking their
// order.
func readPurses(t *testing.T, ts *trellistest.Service) map[string]purseRow {
	t.Helper()
	got := make(map[string]purseRow)
	req := views.Request{Limit: 4}
	prev := math.MinInt
	for {
		p, err := pursesByBalance.Page(context.Background(), ts.Host().Views(), req)
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range p.Rows {
			if row.Balance < prev {
				t.Fatalf("rows out of balance order: %d after %d", row.Balance, prev)
			}
			prev = row.Balance
			got[p.IDs[i]] = row
		}
		if req.Token = p.Next; p.Next == "" {
			return got
		}
	}
}
