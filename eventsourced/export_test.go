package eventsourced_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/eventsourced"
)

// TestExportImportRoundTrip: journals exported from one store, imported
// into another (of every kind) and exported again are the same bytes,
// whole journals, a deleted one and one that retention trimmed alike;
// and the entities load there to the same state.
func TestExportImportRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := entities.NewMemoryStore()
	n := startTally(t, src)
	for i := range 7 { // 7 events, snapshots at 5
		mustDeposit(t, ctx, n, "w-1", i+1)
	}
	mustDeposit(t, ctx, n, "w-2", 3)
	if _, err := Close.Invoke(ctx, n.client, "w-2", done); err != nil {
		t.Fatal(err)
	}
	for i := range 4 { // a snapshot at 3
		if _, err := Add.Invoke(ctx, n.client, "t-1", i); err != nil {
			t.Fatal(err)
		}
	}
	n.clock.Advance(2 * time.Hour)
	if _, err := Add.Invoke(ctx, n.client, "t-1", 10); err != nil { // drops events 1 to 3
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := eventsourced.Export(ctx, src, "wallet", &first); err != nil {
		t.Fatal(err)
	}
	if err := eventsourced.Export(ctx, src, "tally", &first); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(first.String(), "\n"); lines != 1+7+2+1+1+2 {
		t.Fatalf("%d lines exported, want 14:\n%s", lines, first.String())
	}
	for name, newStore := range storeMakers() {
		t.Run(name, func(t *testing.T) {
			dst := newStore(t)
			rep, err := eventsourced.Import(ctx, dst, bytes.NewReader(first.Bytes()), nil)
			if err != nil || rep.Entities != 3 || rep.Events != 11 || len(rep.Refused) != 0 {
				t.Fatalf("import: %+v, %v; want 3 entities, 11 events", rep, err)
			}
			var again bytes.Buffer
			if err := eventsourced.Export(ctx, dst, "wallet", &again); err != nil {
				t.Fatal(err)
			}
			if err := eventsourced.Export(ctx, dst, "tally", &again); err != nil {
				t.Fatal(err)
			}
			if again.String() != first.String() {
				t.Fatalf("exported again\n%s\nfirst export\n%s", again.String(), first.String())
			}
			m := startTally(t, dst)
			if w, err := Balance.Invoke(ctx, m.client, "w-1", done); err != nil || w.Balance != 28 {
				t.Fatalf("w-1 after the import: %+v, %v; want balance 28", w, err)
			}
			if sum, err := Sum.Invoke(ctx, m.client, "t-1", components.Done{}); err != nil || sum != 16 {
				t.Fatalf("t-1 after the import: %d, %v; want 16", sum, err)
			}
			wantRefused(t, errOf(Balance.Invoke(ctx, m.client, "w-2", done)), "w-2 after the import", components.NotFound, "was deleted")
			rep, err = eventsourced.Import(ctx, dst, bytes.NewReader(first.Bytes()), nil)
			if err != nil || rep.Entities != 0 || len(rep.Refused) != 3 || !strings.Contains(rep.Refused[0].Reason, "already") {
				t.Fatalf("import again: %+v, %v; want the 3 entities refused", rep, err)
			}
		})
	}
}

// TestImportRefuses: a journal that is not whole and in order is refused
// by entity, with its line, and the others imported.
func TestImportRefuses(t *testing.T) {
	line := func(id, kind string, seq int) string {
		return fmt.Sprintf(`{"entityType":"wallet","entityId":%q,"kind":%q,"seq":%d,"name":"deposited","at":"2026-01-01T00:00:00Z","data":{"amount":1}}`+"\n", id, kind, seq)
	}
	cases := []struct {
		name, lines, reason string
	}{
		{"Gap", line("a", "event", 1) + line("a", "event", 3), "event 3 follows event 1"},
		{"NoStart", line("a", "event", 2), "starts at event 2, with no snapshot"},
		{"AfterDeleted", line("a", "event", 1) + line("a", "deleted", 1) + line("a", "event", 2), "after the deleted one"},
		{"SnapshotLate", line("a", "event", 1) + line("a", "snapshot", 1), "snapshot record after its first record"},
		{"UnknownKind", line("a", "stuff", 1), `unknown record kind "stuff"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := entities.NewMemoryStore()
			rep, err := eventsourced.Import(context.Background(), store, strings.NewReader(c.lines+line("ok", "event", 1)), nil)
			if err != nil || rep.Entities != 1 || len(rep.Refused) != 1 || rep.Refused[0].Line != 1 || !strings.Contains(rep.Refused[0].Reason, c.reason) {
				t.Fatalf("import: %+v, %v; want a refused on line 1 saying %q and ok imported", rep, err, c.reason)
			}
			if head, _, _ := store.ReadJournal(context.Background(), "wallet", "a"); head.Seq != 0 {
				t.Fatalf("a refused journal was written: %+v", head)
			}
		})
	}
}
