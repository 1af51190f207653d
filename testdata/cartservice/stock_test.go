package main

import (
	"errors"
	"reflect"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/eventsourced"
)

// TestStockCommands runs the stock's commands one after another on one
// SKU, with no server: the events each persists, and what it refuses.
func TestStockCommands(t *testing.T) {
	kit := eventsourced.NewTestKit(Stocks, "apple", nil)
	kit.Given(Restocked{Quantity: 5, Price: 200})
	reserve := func(order string, n int) func() ([]any, error) {
		return func() ([]any, error) {
			out := eventsourced.Exec(kit, Reserve, Reservation{Order: order, Quantity: n})
			return out.Events, out.Err
		}
	}
	release := func(order string) func() ([]any, error) {
		return func() ([]any, error) {
			out := eventsourced.Exec(kit, Release, order)
			return out.Events, out.Err
		}
	}
	for _, c := range []struct {
		name    string
		run     func() (events []any, err error)
		want    []any
		refused components.ErrorKind // 0 (Failure) is never expected here
	}{
		{"reserve", reserve("o-1", 3), []any{Reserved{Order: "o-1", Quantity: 3}}, 0},
		{"reserve again for the same order", reserve("o-1", 3), nil, 0},
		{"reserve more than is available", reserve("o-2", 3), nil, components.Conflict},
		{"release", release("o-1"), []any{Released{Order: "o-1", Quantity: 3}}, 0},
		{"release again", release("o-1"), nil, 0},
	} {
		events, err := c.run()
		var refusal *components.CommandError
		switch {
		case c.refused != 0 && (!errors.As(err, &refusal) || refusal.Kind != c.refused):
			t.Errorf("%s: %v, want a refusal of kind %v", c.name, err, c.refused)
		case c.refused == 0 && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case len(events) != len(c.want) || len(events) > 0 && !reflect.DeepEqual(events, c.want):
			t.Errorf("%s: persisted %v, want %v", c.name, events, c.want)
		}
	}
	if s := kit.State(); s.Available != 5 || len(s.Reserved) != 0 || s.Price != 200 {
		t.Errorf("after: %+v, want 5 available at 200, none reserved", s)
	}
}
