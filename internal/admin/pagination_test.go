package admin_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
)

// paginationTimers is how many timers the pagination test walks through.
const paginationTimers = 2500

// TestAdminPagination: walking GET /admin/timers page by page with
// nextCursor lists each of 2,500 timers exactly once, in run order (due
// time, then name), with no page above its limit, on both stores. The due
// times repeat (37 distinct ones), so that the walk must also order and
// resume within equal due times.
func TestAdminPagination(t *testing.T) {
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) {
			ts := fixture.Start(t, fixture.AdminToken, sc.Opts(t)...)
			ctx := context.Background()
			for i := range paginationTimers {
				call, err := fixture.OK.Deferred(fixture.Order{Order: strconv.Itoa(i)})
				if err != nil {
					t.Fatal(err)
				}
				delay := time.Hour + time.Duration(i%37)*time.Second
				if _, err := ts.Host().Timers.Create(ctx, fmt.Sprintf("page-%04d", i), delay, call); err != nil {
					t.Fatal(err)
				}
			}
			walks := []struct {
				name  string // case name
				limit int    // page size
				query string // name filter ("" for none)
				want  int    // timers the walk must list
			}{
				{name: "limit 100", limit: 100, want: paginationTimers},
				{name: "limit 7", limit: 7, want: paginationTimers},
				{name: "limit 1000", limit: 1000, want: paginationTimers},
				{name: "limit 7, name filter", limit: 7, query: "page-1", want: 1000}, // page-1000 … page-1999
			}
			for _, w := range walks {
				t.Run(w.name, func(t *testing.T) {
					q := url.Values{"limit": {strconv.Itoa(w.limit)}}
					if w.query != "" {
						q.Set("name", w.query)
					}
					maxPages := 2*paginationTimers + 10 // a filtered page may be empty; a loop is still caught
					got, pages := listAll(t, ts, q, w.limit, maxPages)
					seen := make(map[string]bool, len(got))
					for i, tm := range got {
						if seen[tm.Name] {
							t.Fatalf("%s listed twice (at %d)", tm.Name, i)
						}
						seen[tm.Name] = true
						if w.query != "" && !strings.Contains(tm.Name, w.query) {
							t.Fatalf("%s does not match name=%s", tm.Name, w.query)
						}
						if i > 0 {
							prev := got[i-1]
							if tm.DueAt.Before(prev.DueAt) || tm.DueAt.Equal(prev.DueAt) && tm.Name < prev.Name {
								t.Fatalf("out of run order at %d: %s (%v) after %s (%v)", i, tm.Name, tm.DueAt, prev.Name, prev.DueAt)
							}
						}
					}
					if len(got) != w.want {
						t.Fatalf("listed %d timers, want %d (none may be missed)", len(got), w.want)
					}
					if w.query == "" {
						// An unfiltered walk fills its pages: at most one
						// extra (empty) page at the end.
						if full := (w.want + w.limit - 1) / w.limit; pages > full+1 {
							t.Errorf("%d pages, want at most %d", pages, full+1)
						}
					}
				})
			}
		})
	}
}
