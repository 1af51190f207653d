package timers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
)

// queryCases: the admin queries (List with filters and cursors, Stats).
func queryCases() []conformanceCase {
	return []conformanceCase{
		{
			name:     "ListWalks2500",
			property: "following NextCursor through 2,500 timers (+10 failing) at any page size lists each exactly once, in run order; filters select by name substring, failing and upcoming",
			run:      runListWalk,
		},
		{
			name:     "ListRejectsBadQueries",
			property: "a limit above 1,000 or below 0, a negative upcoming, or a cursor not made by List is ErrInvalidQuery; limit 0 means 100",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				for i := range 150 {
					mustCreate(t, s, fmt.Sprintf("t-%03d", i), time.Minute, testCall(`1`))
				}
				for _, q := range []ListQuery{{Limit: 1001}, {Limit: -1}, {Upcoming: -time.Second}, {Cursor: "nope"}, {Cursor: "dDE6eA"}} {
					if _, err := s.List(t.Context(), q); !errors.Is(err, ErrInvalidQuery) {
						t.Errorf("List(%+v) = %v, want ErrInvalidQuery", q, err)
					}
				}
				p, err := s.List(t.Context(), ListQuery{})
				if err != nil || len(p.Timers) != DefaultListLimit || p.NextCursor == "" {
					t.Errorf("default page: %d timers, cursor %q, %v", len(p.Timers), p.NextCursor, err)
				}
			},
		},
		{
			name:     "ListFiltersByCall",
			property: "List filters by component, method and entity (exact), combined with each other, the name filter and the cursor",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				calls := map[string]components.DeferredCall{
					"cart-42-expire":  {ComponentID: "cart", Method: "expire", EntityID: "42", Argument: []byte(`1`)},
					"cart-42-remind":  {ComponentID: "cart", Method: "remind", EntityID: "42", Argument: []byte(`1`)},
					"cart-420-expire": {ComponentID: "cart", Method: "expire", EntityID: "420", Argument: []byte(`1`)},
					"order-42-expire": {ComponentID: "order", Method: "expire", EntityID: "42", Argument: []byte(`1`)},
					"report":          {ComponentID: "reports", Method: "expire", Argument: []byte(`1`)},
				}
				i := 0
				for name, c := range calls {
					i++
					mustCreate(t, s, name, time.Duration(i)*time.Second, c)
				}
				for _, tt := range []struct {
					q    ListQuery
					want []string
				}{
					{ListQuery{ComponentID: "cart"}, []string{"cart-42-expire", "cart-42-remind", "cart-420-expire"}},
					{ListQuery{ComponentID: "cart", EntityID: "42"}, []string{"cart-42-expire", "cart-42-remind"}},
					{ListQuery{EntityID: "42"}, []string{"cart-42-expire", "cart-42-remind", "order-42-expire"}},
					{ListQuery{Method: "expire", EntityID: "42"}, []string{"cart-42-expire", "order-42-expire"}},
					{ListQuery{Method: "expire", NameContains: "rep"}, []string{"report"}},
					{ListQuery{ComponentID: "car"}, nil},
					{ListQuery{ComponentID: "cart", Limit: 1}, []string{"cart-42-expire", "cart-42-remind", "cart-420-expire"}},
				} {
					var got []string
					q := tt.q
					for pages := 0; ; pages++ {
						p, err := s.List(t.Context(), q)
						if err != nil || pages > 10 {
							t.Fatalf("List(%+v): %v after %d pages", q, err, pages)
						}
						for _, tm := range p.Timers {
							got = append(got, tm.Name)
						}
						if q.Cursor = p.NextCursor; q.Cursor == "" {
							break
						}
					}
					slices.Sort(got)
					if !slices.Equal(got, tt.want) {
						t.Errorf("List(%+v) = %v, want %v", tt.q, got, tt.want)
					}
				}
			},
		},
		{
			name:     "Stats",
			property: "Stats counts active and failing timers, those due within a minute (overdue included), and reports the limit",
			cfg:      Config{MaxActive: 100},
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				for i, d := range []time.Duration{0, 30 * time.Second, time.Minute, time.Minute + time.Millisecond, time.Hour} {
					mustCreate(t, s, fmt.Sprintf("t-%d", i), d, testCall(`1`))
				}
				makeFailing(t, e, s, "f", 2*time.Minute)
				wantStats(t, s, Stats{Active: 6, Failing: 1, Limit: 100, DueWithin1m: 3})
			},
		},
	}
}

// makeFailing creates a timer and records one failed call of it through
// the store protocol, rescheduled retryAfter from now.
func makeFailing(t *testing.T, e *env, s *Scheduler, name string, retryAfter time.Duration) {
	t.Helper()
	tm := mustCreate(t, s, name, 0, testCall(`1`))
	// A claim takes any due timer: others that are due go back until it
	// takes this one (every partition comes first in turn).
	for range 4 * redisPartitions {
		b, err := e.store.claim(t.Context(), 1, time.Second)
		if err != nil || len(b.timers) != 1 {
			t.Fatalf("claim %s: %+v, %v", name, b, err)
		}
		if b.timers[0].Name == name {
			tm.Attempts = b.timers[0].Attempts
			if _, err := e.store.fail(t.Context(), []failure{{firing: firingOf(tm), err: "it failed", retryAfter: retryAfter}}); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := e.store.release(t.Context(), []Firing{firingOf(b.timers[0])}); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("no claim took %s", name)
}

func runListWalk(t *testing.T, e *env) {
	s := e.scheduler(t)
	const n = 2500
	var all []string
	for i := range n {
		name := fmt.Sprintf("t-%04d", i)
		// Pairs share a due time, so the walk must order by name within one.
		mustCreate(t, s, name, time.Hour+time.Duration(i/2)*time.Second, testCall(`1`))
		all = append(all, name)
	}
	var failing []string
	for i := range 10 {
		name := fmt.Sprintf("f-%d", i)
		makeFailing(t, e, s, name, 2*time.Hour)
		failing = append(failing, name)
	}
	all = append(all, failing...) // they run last: due in 2 h
	byName := func(sub string) (out []string) {
		for _, name := range all {
			if strings.Contains(name, sub) {
				out = append(out, name)
			}
		}
		return out
	}
	cases := []struct {
		// q is the query without cursor; every page size in sizes is tried.
		q ListQuery
		// want is every name the walk must list, in order.
		want []string
	}{
		{ListQuery{}, all},
		{ListQuery{NameContains: "t-12"}, byName("t-12")},
		{ListQuery{NameContains: "no-such"}, nil},
		{ListQuery{Failing: true}, failing},
		{ListQuery{Failing: true, NameContains: "f-1"}, []string{"f-1"}},
		// Due within 1 h 100 s: t-0000 … t-0201 (two per second).
		{ListQuery{Upcoming: time.Hour + 100*time.Second}, all[:202]},
	}
	for _, c := range cases {
		for _, size := range []int{1, 7, 100, 1000} {
			if size == 1 && len(c.want) > 300 {
				continue // a page per timer: covered by the smaller walks
			}
			q := c.q
			q.Limit = size
			got := walk(t, s, q)
			if !slices.Equal(got, c.want) {
				t.Errorf("walk %+v: %d timers, want %d; first difference at %d", q, len(got), len(c.want), firstDiff(got, c.want))
			}
		}
	}
}

// walk follows NextCursor to the end and returns the names listed.
func walk(t *testing.T, s *Scheduler, q ListQuery) []string {
	t.Helper()
	var names []string
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("walk does not end")
		}
		p, err := s.List(t.Context(), q)
		if err != nil {
			t.Fatalf("List(%+v): %v", q, err)
		}
		if len(p.Timers) > max(q.Limit, 1) {
			t.Fatalf("page of %d timers, limit %d", len(p.Timers), q.Limit)
		}
		for _, tm := range p.Timers {
			names = append(names, tm.Name)
		}
		if p.NextCursor == "" {
			return names
		}
		q.Cursor = p.NextCursor
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
