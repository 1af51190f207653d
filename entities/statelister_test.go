package entities_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/trellis-go/trellis/entities"
)

// TestStateLister: StateIDs lists an entity type's states of every shard
// in one pass, and no other type's (a type whose name is a prefix of it,
// or holds SCAN's glob characters); States reads them in the order
// asked, a batch at a time, skipping an id with no state.
func TestStateLister(t *testing.T) {
	for name, newStore := range changeTargets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s, _ := newStore(t)
			lister, ok := s.(entities.StateLister)
			if !ok {
				t.Fatalf("%T is not a StateLister", s)
			}
			const n = 250 // over two of States' batches, in most shards
			var want, states []string
			revs := make(map[string]uint64)
			for i := range n {
				id := fmt.Sprintf("o-%03d", i)
				revs[id] = mustSave(t, ctx, s, "order", id, fmt.Sprintf(`{"n":%d}`, i), 0)
			}
			mustDelete(t, ctx, s, "order", "o-007", revs["o-007"])
			for id, rev := range revs {
				if id != "o-007" {
					want = append(want, id)
					states = append(states, fmt.Sprintf("%s r%d", id, rev))
				}
			}
			slices.Sort(want)
			slices.Sort(states)
			for _, other := range []string{"orders", "ord", "ord*r", "order:x"} {
				mustSave(t, ctx, s, other, "o-001", `{}`, 0)
			}

			ids, err := lister.StateIDs(ctx, "order")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("StateIDs = %d ids %q…, want %d", len(ids), ids[:min(5, len(ids))], len(want))
			}
			var got []string
			asked := append([]string{"o-007", "absent"}, ids...)
			if err := lister.States(ctx, "order", asked, func(c entities.Change) error {
				if c.EntityType != "order" || c.Seq != 0 || string(c.Data) == "" {
					t.Errorf("state %+v: want type order, Seq 0 and its data", c)
				}
				got = append(got, fmt.Sprintf("%s r%d", c.EntityID, c.Revision))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, states) {
				t.Fatalf("States = %d states, want %d (%q…)", len(got), len(states), states[:3])
			}
		})
	}
}
