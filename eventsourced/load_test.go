package eventsourced_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/eventsourced"
)

// TestLoadBadJournal: what a journal may hold that the code does not
// expect fails the load with an error naming it, and the entity stays
// unloaded; an old event name with an upcaster loads.
func TestLoadBadJournal(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	cases := []struct {
		name    string
		events  []entities.JournalEvent
		wantErr string // "" loads
		is      error
		want    string // the balance and notes once loaded
	}{
		{name: "UnknownName", events: []entities.JournalEvent{
			{Seq: 1, Name: "deposited", Data: []byte(`{"amount":2}`), At: at},
			{Seq: 2, Name: "refunded", Data: []byte(`{"amount":1}`), At: at},
		}, wantErr: `event 2 of wallet "w-1": unknown event name "refunded": wallet defines no event type nor upcaster of that name`, is: eventsourced.ErrUnknownEvent},
		{name: "BadData", events: []entities.JournalEvent{
			{Seq: 1, Name: "deposited", Data: []byte(`{"amount":"two"}`), At: at},
		}, wantErr: `event 1 of wallet "w-1": decode event "deposited"`},
		{name: "Upcast", events: []entities.JournalEvent{
			{Seq: 1, Name: "credited", Data: []byte(`{"cents":500}`), At: at},
			{Seq: 2, Name: "withdrawn", Data: []byte(`{"amount":1}`), At: at},
		}, want: "4 [+credited -]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := entities.NewMemoryStore()
			if err := store.Append(t.Context(), entities.Fence{}, "wallet", "w-1", entities.JournalWrite{Events: c.events}); err != nil {
				t.Fatal(err)
			}
			n := startNode(t, store)
			for range 2 { // the second command loads again, and fails again
				w, err := Balance.Invoke(t.Context(), n.client, "w-1", done)
				if c.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), c.wantErr) || (c.is != nil && !errors.Is(err, c.is)) {
						t.Fatalf("balance: %v, want an error saying %q", err, c.wantErr)
					}
					continue
				}
				if err != nil || fmt.Sprint(w.Balance, " ", w.Notes) != c.want {
					t.Fatalf("balance = %+v, %v; want %s", w, err, c.want)
				}
			}
		})
	}
}

// TestSnapshotReplayEqualsFullReplay: after random commands, an entity
// loaded from its latest snapshot and the events after it has the state
// that replaying its whole journal gives, on every store; and the load
// read no more than a snapshot's span of events.
func TestSnapshotReplayEqualsFullReplay(t *testing.T) {
	for name, newStore := range storeMakers() {
		t.Run(name, func(t *testing.T) {
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 0))
			store := newStore(t)
			ctx := t.Context()
			first := startNode(t, store)
			for i := range 20 + rng.IntN(40) {
				id := fmt.Sprintf("w-%d", rng.IntN(3))
				var err error
				if rng.IntN(3) == 0 {
					_, err = Move.Invoke(ctx, first.client, id, rng.IntN(4))
				} else {
					_, err = Deposit.Invoke(ctx, first.client, id, Deposited{Amount: 1 + rng.IntN(9), Note: fmt.Sprint(i)})
				}
				if err != nil && !strings.Contains(err.Error(), "the balance is") {
					t.Fatal(err)
				}
			}
			fresh := startNode(t, store) // loads each entity anew
			for i := range 3 {
				id := fmt.Sprintf("w-%d", i)
				head, after, err := store.ReadJournal(ctx, "wallet", id)
				if err != nil {
					t.Fatal(err)
				}
				if head.Seq >= 5 && (head.Snapshot == nil || len(after) >= 5) {
					t.Fatalf("%s: %d events, snapshot %+v, %d events read after it; want a snapshot every 5", id, head.Seq, head.Snapshot, len(after))
				}
				got, err := Balance.Invoke(ctx, fresh.client, id, done)
				if err != nil {
					t.Fatal(err)
				}
				if want := fullReplay(t, store, id); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s loaded from its snapshot: %+v; the whole journal replayed: %+v", id, got, want)
				}
			}
		})
	}
}

// fullReplay folds the entity's whole journal with applyWallet.
func fullReplay(t *testing.T, store entities.JournalStore, id string) Wallet {
	t.Helper()
	events, err := store.Events(t.Context(), "wallet", id, 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	var w Wallet
	for _, e := range events {
		var ev any
		switch e.Name {
		case "deposited":
			var d Deposited
			err = json.Unmarshal(e.Data, &d)
			ev = d
		case "withdrawn":
			var x Withdrawn
			err = json.Unmarshal(e.Data, &x)
			ev = x
		default:
			t.Fatalf("event %d: %q", e.Seq, e.Name)
		}
		if err != nil {
			t.Fatal(err)
		}
		w = applyWallet(w, ev)
	}
	return w
}
