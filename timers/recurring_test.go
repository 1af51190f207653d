package timers

import (
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
)

// TestStoredRecurrenceKeepsTheRunExact: a run time off the millisecond
// survives the stored form, so the next run computed from it is the next
// one, not the same run again.
func TestStoredRecurrenceKeepsTheRunExact(t *testing.T) {
	run := time.Date(2030, 1, 2, 3, 4, 5, 1_200_400, time.UTC)
	rc := &Recurrence{Schedule: Schedule{Every: time.Minute, Start: run}.filled(run), Run: run}
	stored, err := encodeStored(rc, components.DeferredCall{ComponentID: "c", Method: "m"}, "")
	if err != nil {
		t.Fatal(err)
	}
	got, call, _, err := decodeStored(string(stored))
	if err != nil || call.ComponentID != "c" || !got.Run.Equal(run) {
		t.Fatalf("decoded %+v, %+v, %v; want the run %v", got, call, err, run)
	}
	p, err := got.Schedule.plan()
	if err != nil {
		t.Fatal(err)
	}
	if next, _ := p.following(got.Run, run.Add(time.Millisecond), false); !next.Equal(run.Add(time.Minute)) {
		t.Errorf("next run %v, want %v", next, run.Add(time.Minute))
	}
}
