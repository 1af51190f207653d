package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// adminFixture is a service with five timers, one of them failing. In run
// order, after the fake clock moved 2 s (t0 is the start):
//
//	order-fail       fixture.Fail, due t0+1s, ran at t0+2s and failed: due again t0+5s
//	order-a-1        fixture.OK,   due t0+30s
//	report/daily 1   fixture.OK,   due t0+5m   (a name with '/' and ' ')
//	counter-bump     counter.Increase of entity c-7, due t0+10m, maxRetries 3
//	order-a-2        fixture.OK,   due t0+2h
type adminFixture struct {
	ts *trellistest.Service
}

var fixtureOrder = []string{"order-fail", "order-a-1", "report/daily 1", "counter-bump", "order-a-2"}

func newAdminFixture(t *testing.T, opts ...trellistest.Option) adminFixture {
	t.Helper()
	ts := fixture.Start(t, fixture.AdminToken, opts...)
	ctx := context.Background()
	sched := ts.Host().Timers
	must := func(c components.DeferredCall, err error) components.DeferredCall {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	creates := []struct {
		name  string                  // timer name
		delay time.Duration           // delay from t0
		call  components.DeferredCall // the call
		opts  []timers.CreateOption   // create options
	}{
		{"order-a-1", 30 * time.Second, must(fixture.OK.Deferred(fixture.Order{Order: "a-1", Items: []int{1}})), nil},
		{"order-a-2", 2 * time.Hour, must(fixture.OK.Deferred(fixture.Order{Order: "a-2"})), nil},
		{"order-fail", time.Second, must(fixture.Fail.Deferred(fixture.Order{Order: "f", Items: []int{4, 2}})), nil},
		{"counter-bump", 10 * time.Minute, must(counter.Increase.Deferred("c-7", 5)), []timers.CreateOption{timers.WithMaxRetries(3)}},
		{"report/daily 1", 5 * time.Minute, must(fixture.OK.Deferred(fixture.Order{Order: "r"})), nil},
	}
	for _, c := range creates {
		if _, err := sched.Create(ctx, c.name, c.delay, c.call, c.opts...); err != nil {
			t.Fatal(err)
		}
	}
	// Past order-fail's due time by more than the store's millisecond
	// rounding (due times round up, now rounds down): it runs and fails.
	ts.Clock.Advance(2 * time.Second)
	waitFailing(t, ts, "order-fail")
	return adminFixture{ts: ts}
}

// TestAdminTimers runs the admin routes against a fixture, on both stores.
func TestAdminTimers(t *testing.T) {
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) {
			f := newAdminFixture(t, sc.Opts(t)...)
			t.Run("filters", f.testFilters)
			t.Run("get", f.testGet)
			t.Run("stats", f.testStats)
			t.Run("delete", f.testDelete)
		})
	}
}

// testFilters: each filter, alone and combined, lists exactly the
// matching timers in run order.
func (f adminFixture) testFilters(t *testing.T) {
	tests := []struct {
		name  string     // case name
		query url.Values // the query
		want  []string   // the names listed, in order
	}{
		{name: "no filter", query: url.Values{}, want: fixtureOrder},
		{name: "name substring", query: url.Values{"name": {"order-"}}, want: []string{"order-fail", "order-a-1", "order-a-2"}},
		{name: "name substring inside", query: url.Values{"name": {"a-"}}, want: []string{"order-a-1", "order-a-2"}},
		{name: "name with a slash", query: url.Values{"name": {"/daily"}}, want: []string{"report/daily 1"}},
		{name: "name is case-sensitive", query: url.Values{"name": {"ORDER"}}, want: []string{}},
		{name: "failing only", query: url.Values{"failing": {"true"}}, want: []string{"order-fail"}},
		{name: "failing=false keeps all", query: url.Values{"failing": {"false"}}, want: fixtureOrder},
		{name: "upcoming 90s", query: url.Values{"upcoming": {"90s"}}, want: []string{"order-fail", "order-a-1"}},
		{name: "upcoming 6m", query: url.Values{"upcoming": {"6m"}}, want: []string{"order-fail", "order-a-1", "report/daily 1"}},
		{name: "upcoming 1h30m", query: url.Values{"upcoming": {"1h30m"}}, want: []string{"order-fail", "order-a-1", "report/daily 1", "counter-bump"}},
		{name: "upcoming and name", query: url.Values{"upcoming": {"1h"}, "name": {"counter"}}, want: []string{"counter-bump"}},
		{name: "failing and name, no match", query: url.Values{"failing": {"true"}, "name": {"order-a"}}, want: []string{}},
		{name: "all three", query: url.Values{"failing": {"true"}, "name": {"fail"}, "upcoming": {"5s"}}, want: []string{"order-fail"}},
		{name: "limit 2 pages through", query: url.Values{"limit": {"2"}}, want: fixtureOrder},
		{name: "entity", query: url.Values{"entityId": {"c-7"}}, want: []string{"counter-bump"}},
		{name: "component", query: url.Values{"componentId": {fixture.ActionID}}, want: []string{"order-fail", "order-a-1", "report/daily 1", "order-a-2"}},
		{name: "method", query: url.Values{"method": {"expireOrder"}}, want: []string{"order-a-1", "report/daily 1", "order-a-2"}},
		{name: "component and method", query: url.Values{"componentId": {"counter"}, "method": {"increase"}}, want: []string{"counter-bump"}},
		{name: "method, name and failing", query: url.Values{"method": {"chargePayment"}, "name": {"order"}, "failing": {"true"}}, want: []string{"order-fail"}},
		{name: "method and upcoming, paged", query: url.Values{"method": {"expireOrder"}, "upcoming": {"6m"}, "limit": {"1"}}, want: []string{"order-a-1", "report/daily 1"}},
		{name: "entity matches exactly", query: url.Values{"entityId": {"c-"}}, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := listAll(t, f.ts, tt.query, 0, 100)
			if g := names(got); !slices.Equal(g, tt.want) {
				t.Errorf("listed %q, want %q", g, tt.want)
			}
		})
	}
	// An empty result is an empty array, not null.
	resp := fixture.Admin(t, f.ts, http.MethodGet, "/admin/timers?name=nothing-matches")
	if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"timers":[]`) {
		t.Errorf("empty list: %d %s", resp.Status, resp.Body)
	}
	if _, ok := jsonKeys(t, resp.Body)["nextCursor"]; ok {
		t.Errorf("a finished walk has a nextCursor: %s", resp.Body)
	}
}

// testGet: GET one timer shows every field as the scheduler has it; a
// missing name is a 404 problem.
func (f adminFixture) testGet(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string   // timer name
		payload    string   // the payload, as JSON
		entity     string   // entityId ("" for absent)
		failing    bool     // lastError and lastAttemptAt are present
		errorPart  string   // substring of lastError
		maxRetries int      // maxRetries
		absentKeys []string // keys the JSON must not have
	}{
		{name: "counter-bump", payload: `5`, entity: "c-7", maxRetries: 3, absentKeys: []string{"lastError", "lastAttemptAt"}},
		{name: "order-fail", payload: `{"order":"f","items":[4,2]}`, failing: true, errorPart: "refused order f", absentKeys: []string{"entityId"}},
		{name: "report/daily 1", payload: `{"order":"r","items":null}`, absentKeys: []string{"entityId", "lastError", "lastAttemptAt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := f.ts.Host().Timers.Get(ctx, tt.name)
			if err != nil {
				t.Fatal(err)
			}
			resp := fixture.Admin(t, f.ts, http.MethodGet, timerPath(tt.name))
			if resp.Status != http.StatusOK {
				t.Fatalf("GET: %d %s", resp.Status, resp.Body)
			}
			var got admin.Timer
			resp.JSON(t, &got)
			keys := jsonKeys(t, resp.Body)
			for _, k := range tt.absentKeys {
				if _, ok := keys[k]; ok {
					t.Errorf("key %q present: %s", k, resp.Body)
				}
			}
			for _, k := range []string{"name", "componentId", "method", "payload", "dueAt", "createdAt", "attempts", "maxRetries"} {
				if _, ok := keys[k]; !ok {
					t.Errorf("key %q missing: %s", k, resp.Body)
				}
			}
			if got.Name != tt.name || got.ComponentId != want.Call.ComponentID || got.Method != want.Call.Method || got.EntityId != tt.entity {
				t.Errorf("call fields: %+v, want %s %s.%s[%s]", got, tt.name, want.Call.ComponentID, want.Call.Method, tt.entity)
			}
			var gotPayload, wantPayload any
			if err := json.Unmarshal(got.Payload, &gotPayload); err != nil {
				t.Fatalf("payload %s: %v", got.Payload, err)
			}
			_ = json.Unmarshal([]byte(tt.payload), &wantPayload)
			if g, w := mustJSON(t, gotPayload), mustJSON(t, wantPayload); g != w {
				t.Errorf("payload %s, want %s", g, w)
			}
			if !got.DueAt.Equal(want.DueAt) || !got.CreatedAt.Equal(want.CreatedAt) || !got.LastAttemptAt.Equal(want.LastAttemptAt) {
				t.Errorf("times due %v created %v last %v, want %v %v %v", got.DueAt, got.CreatedAt, got.LastAttemptAt, want.DueAt, want.CreatedAt, want.LastAttemptAt)
			}
			for k, v := range map[string]json.RawMessage{"dueAt": keys["dueAt"], "createdAt": keys["createdAt"]} {
				var s string
				_ = json.Unmarshal(v, &s)
				if _, err := time.Parse(time.RFC3339, s); err != nil || !strings.HasSuffix(s, "Z") {
					t.Errorf("%s %s is not an RFC 3339 UTC time: %v", k, v, err)
				}
			}
			if got.Attempts != want.Attempts || got.MaxRetries != tt.maxRetries {
				t.Errorf("attempts %d maxRetries %d, want %d %d", got.Attempts, got.MaxRetries, want.Attempts, tt.maxRetries)
			}
			if tt.failing {
				if got.Attempts != 1 || !strings.Contains(got.LastError, tt.errorPart) || got.LastAttemptAt.IsZero() {
					t.Errorf("failing timer: attempts %d lastError %q lastAttemptAt %v", got.Attempts, got.LastError, got.LastAttemptAt)
				}
				if !got.DueAt.After(got.LastAttemptAt) {
					t.Errorf("a failed timer is due again (%v) after its attempt (%v)", got.DueAt, got.LastAttemptAt)
				}
			} else if got.Attempts != 0 || got.LastError != "" {
				t.Errorf("pending timer: attempts %d lastError %q", got.Attempts, got.LastError)
			}
		})
	}
	t.Run("absent", func(t *testing.T) {
		resp := fixture.Admin(t, f.ts, http.MethodGet, timerPath("no-such-timer"))
		if resp.Status != http.StatusNotFound {
			t.Fatalf("GET absent: %d %s", resp.Status, resp.Body)
		}
		if p := resp.Problem(t); !strings.Contains(p.Detail, `"no-such-timer"`) {
			t.Errorf("detail %q does not name the timer", p.Detail)
		}
	})
}

// testStats: the counts are the store's.
func (f adminFixture) testStats(t *testing.T) {
	resp := fixture.Admin(t, f.ts, http.MethodGet, "/admin/timers/stats")
	if resp.Status != http.StatusOK {
		t.Fatalf("GET stats: %d %s", resp.Status, resp.Body)
	}
	var got admin.TimerStats
	resp.JSON(t, &got)
	// order-fail (t0+5s) and order-a-1 (t0+30s) are due within a minute.
	want := admin.TimerStats{Active: 5, Failing: 1, Limit: timers.DefaultMaxActive, DueWithin1m: 2}
	if got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// testDelete: DELETE answers 204 whether or not the timer exists, and the
// timer is gone.
func (f adminFixture) testDelete(t *testing.T) {
	steps := []struct {
		method string // HTTP method
		name   string // timer name
		status int    // expected status
	}{
		{http.MethodDelete, "order-a-2", http.StatusNoContent},
		{http.MethodGet, "order-a-2", http.StatusNotFound},
		{http.MethodDelete, "order-a-2", http.StatusNoContent}, // again: not an error
		{http.MethodDelete, "never-existed", http.StatusNoContent},
		{http.MethodDelete, "report/daily 1", http.StatusNoContent}, // an escaped name
		{http.MethodGet, "report/daily 1", http.StatusNotFound},
	}
	for _, s := range steps {
		resp := fixture.Admin(t, f.ts, s.method, timerPath(s.name))
		if resp.Status != s.status {
			t.Fatalf("%s %s: %d, want %d: %s", s.method, s.name, resp.Status, s.status, resp.Body)
		}
		if s.status == http.StatusNoContent && len(resp.Body) != 0 {
			t.Errorf("%s %s: 204 with a body %q", s.method, s.name, resp.Body)
		}
	}
	got, _ := listAll(t, f.ts, url.Values{}, 0, 10)
	if g, want := names(got), []string{"order-fail", "order-a-1", "counter-bump"}; !slices.Equal(g, want) {
		t.Errorf("after the deletes: %q, want %q", g, want)
	}
}

// TestAdminStatsIsNotATimerName: GET /admin/timers/stats is the stats
// route even when a timer is named "stats"; that timer is listed with
// name=stats and deleted with DELETE /admin/timers/stats.
func TestAdminStatsIsNotATimerName(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	ctx := context.Background()
	call, err := fixture.OK.Deferred(fixture.Order{Order: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Host().Timers.Create(ctx, "stats", time.Hour, call); err != nil {
		t.Fatal(err)
	}
	resp := fixture.Admin(t, ts, http.MethodGet, "/admin/timers/stats")
	keys := jsonKeys(t, resp.Body)
	if _, isStats := keys["active"]; resp.Status != http.StatusOK || !isStats {
		t.Fatalf("GET /admin/timers/stats: %d %s, want the stats", resp.Status, resp.Body)
	}
	listed, _ := listAll(t, ts, url.Values{"name": {"stats"}}, 0, 10)
	if g := names(listed); !slices.Equal(g, []string{"stats"}) {
		t.Errorf("name=stats lists %q", g)
	}
	if resp := fixture.Admin(t, ts, http.MethodDelete, "/admin/timers/stats"); resp.Status != http.StatusNoContent {
		t.Fatalf("DELETE /admin/timers/stats: %d %s", resp.Status, resp.Body)
	}
	if _, err := ts.Host().Timers.Get(ctx, "stats"); !errors.Is(err, timers.ErrNotFound) {
		t.Errorf("the timer named stats is still there: %v", err)
	}
}

// TestAdminInvalidQueries: each invalid parameter is a 400 problem that
// names it; the bounds themselves are accepted.
func TestAdminInvalidQueries(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	tests := []struct {
		name   string // case name
		query  string // raw query string
		status int    // expected status
		field  string // the parameter the problem must name ("" when 200)
	}{
		{name: "limit 0", query: "limit=0", status: 400, field: "limit"},
		{name: "limit 1001", query: "limit=1001", status: 400, field: "limit"},
		{name: "limit negative", query: "limit=-1", status: 400, field: "limit"},
		{name: "limit garbage", query: "limit=garbage", status: 400, field: "limit"},
		{name: "limit fraction", query: "limit=1.5", status: 400, field: "limit"},
		{name: "limit 1", query: "limit=1", status: 200},
		{name: "limit 1000", query: "limit=1000", status: 200},
		{name: "cursor not base64", query: "cursor=!!!", status: 400, field: "cursor"},
		{name: "cursor not ours", query: "cursor=Zm9v", status: 400, field: "cursor"},
		{name: "upcoming garbage", query: "upcoming=soon", status: 400, field: "upcoming"},
		{name: "upcoming without unit", query: "upcoming=90", status: 400, field: "upcoming"},
		{name: "upcoming negative", query: "upcoming=-5s", status: 400, field: "upcoming"},
		{name: "upcoming zero", query: "upcoming=0s", status: 400, field: "upcoming"},
		{name: "upcoming 2h", query: "upcoming=2h", status: 200},
		{name: "failing garbage", query: "failing=maybe", status: 400, field: "failing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := fixture.Admin(t, ts, http.MethodGet, "/admin/timers?"+tt.query)
			if resp.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.Status, tt.status, resp.Body)
			}
			if tt.field == "" {
				return
			}
			p := resp.Problem(t)
			if len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
				t.Errorf("problem names %+v, want the field %q", p.Errors, tt.field)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
