package views_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/trellis-go/trellis/views"
)

// TestViewPagingModel: random changes to many orders (their totals move
// them in the query's order; some are removed, cancelled or created)
// between the pages of a client that pages through a query. Every page
// sequence is checked against the model of the orders: no row twice, the
// query's order kept across the pages, and every order that was in the
// result when the sequence began and was not changed during it seen.
func TestViewPagingModel(t *testing.T) {
	const entities, sequences, limit, writesPerPage = 120, 12, 7, 3
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			ts := st.start(t)
			rng := rand.New(rand.NewPCG(42, uint64(len(st.name))))
			model := make(map[string]order) // the orders with a row
			var positions []string
			touched := make(map[string]bool) // during the sequence
			write := func() string {
				id := fmt.Sprintf("m-%03d", rng.IntN(entities))
				touched[id] = true
				switch rng.IntN(10) {
				case 0:
					delete(model, id)
					return remove(t, ts, id)
				case 1:
					delete(model, id)
					return put(t, ts, id, order{Customer: "c", Status: "cancelled", Total: rng.IntN(1000)})
				default:
					o := order{Customer: "c", Status: "open", Total: rng.IntN(1000)}
					model[id] = o
					return put(t, ts, id, o)
				}
			}
			for range entities {
				positions = append(positions, write())
			}
			for seq := range sequences {
				caughtUp(t, ts, positions...)
				positions = positions[:0]
				before := make(map[string]order, len(model))
				for id, o := range model {
					before[id] = o
				}
				clear(touched)
				seen := make(map[string]bool)
				req := views.Request{Min: "100", Max: "900", Limit: limit}
				last, pages := "", 0
				for {
					p, err := byTotal.Page(context.Background(), ts.Host().Views(), req)
					if err != nil {
						t.Fatalf("sequence %d page %d: %v", seq, pages, err)
					}
					pages++
					for _, row := range p.Rows {
						key := fmt.Sprintf("%04d/%s", row.Total, row.ID)
						switch {
						case seen[row.ID]:
							t.Fatalf("sequence %d page %d: %s seen twice", seq, pages, row.ID)
						case key <= last:
							t.Fatalf("sequence %d page %d: %s after %s: out of order", seq, pages, key, last)
						case row.Total < 100 || row.Total >= 900:
							t.Fatalf("sequence %d page %d: %s out of the range", seq, pages, key)
						}
						seen[row.ID], last = true, key
					}
					if p.Next == "" {
						break
					}
					req.Token = p.Next
					for range writesPerPage {
						positions = append(positions, write())
					}
				}
				for id, o := range before {
					if o.Total >= 100 && o.Total < 900 && !touched[id] && !seen[id] {
						t.Fatalf("sequence %d: %s (total %d) not changed and not seen in %d pages", seq, id, o.Total, pages)
					}
				}
			}
		})
	}
}
