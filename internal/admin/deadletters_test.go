package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// deadLetterPath is the path of the dead letter called name, escaped.
func deadLetterPath(name string) string { return "/admin/dead-letters/" + url.PathEscape(name) }

// TestAdminDeadLetters: a timer that gave up is listed, read, counted,
// retried (refused while an active timer has its name) and deleted
// through the admin routes, on both stores.
func TestAdminDeadLetters(t *testing.T) {
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) {
			ts := fixture.Start(t, fixture.AdminToken, sc.Opts(t)...)
			sched := ts.Host().Timers
			call := fixture.Call(t, true, "dead/1")
			fixture.GiveUp(t, ts, "dead/1")

			resp := fixture.Admin(t, ts, http.MethodGet, "/admin/dead-letters")
			var page admin.DeadLetterPage
			resp.JSON(t, &page)
			if resp.Status != http.StatusOK || len(page.DeadLetters) != 1 {
				t.Fatalf("list: %d %s, want one dead letter", resp.Status, resp.Body)
			}
			d := page.DeadLetters[0]
			if d.Timer.Name != "dead/1" || d.Timer.Attempts != 2 || d.Timer.MaxRetries != 1 || d.Timer.LastError == "" ||
				d.Timer.ComponentId != call.ComponentID || string(d.Timer.Payload) != string(call.Argument) || d.DiedAt.IsZero() {
				t.Errorf("dead letter %+v: want dead/1 with its call, 2 attempts, an error and a time of death", d)
			}
			resp = fixture.Admin(t, ts, http.MethodGet, deadLetterPath("dead/1"))
			if resp.Status != http.StatusOK {
				t.Errorf("GET the dead letter: %d %s", resp.Status, resp.Body)
			}
			var stats admin.TimerStats
			fixture.Admin(t, ts, http.MethodGet, "/admin/timers/stats").JSON(t, &stats)
			if stats.DeadLetters != 1 || stats.Active != 0 {
				t.Errorf("stats %+v: want 1 dead letter, 0 active", stats)
			}

			// Refused while an active timer has the name.
			if _, err := sched.Create(t.Context(), "dead/1", time.Hour, fixture.Call(t, false, "d-2")); err != nil {
				t.Fatal(err)
			}
			if resp := fixture.Admin(t, ts, http.MethodPost, deadLetterPath("dead/1")+"/retry"); resp.Status != http.StatusConflict {
				t.Errorf("retry over an active timer: %d %s, want 409", resp.Status, resp.Body)
			}
			if err := sched.Delete(t.Context(), "dead/1"); err != nil {
				t.Fatal(err)
			}
			resp = fixture.Admin(t, ts, http.MethodPost, deadLetterPath("dead/1")+"/retry")
			var tm admin.Timer
			resp.JSON(t, &tm)
			if resp.Status != http.StatusOK || tm.Name != "dead/1" || tm.Attempts != 0 || tm.MaxRetries != 1 {
				t.Fatalf("retry: %d %s, want the timer with fresh retries", resp.Status, resp.Body)
			}
			if resp := fixture.Admin(t, ts, http.MethodGet, deadLetterPath("dead/1")); resp.Status != http.StatusNotFound {
				t.Errorf("GET after retry: %d, want 404", resp.Status)
			}

			// It fails again, twice: a dead letter again, then deleted.
			ts.Clock.Advance(2 * time.Second)
			waitFailing(t, ts, "dead/1")
			ts.Clock.Advance(timers.Backoff(1) + time.Second)
			trellistest.Eventually(t, 10*time.Second, "dead/1 a dead letter again", func() bool {
				_, err := sched.GetDeadLetter(context.Background(), "dead/1")
				return err == nil
			})
			for range 2 {
				if resp := fixture.Admin(t, ts, http.MethodDelete, deadLetterPath("dead/1")); resp.Status != http.StatusNoContent {
					t.Errorf("DELETE: %d %s, want 204", resp.Status, resp.Body)
				}
			}
			for _, path := range []string{deadLetterPath("dead/1"), deadLetterPath("dead/1") + "/retry"} {
				method := http.MethodGet
				if path != deadLetterPath("dead/1") {
					method = http.MethodPost
				}
				if resp := fixture.Admin(t, ts, method, path); resp.Status != http.StatusNotFound ||
					resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s %s after delete: %d %s, want a 404 problem", method, path, resp.Status, resp.Header.Get("Content-Type"))
				}
			}
		})
	}
}

// TestAdminDeadLettersBadQuery: a bad limit or cursor is a 400 naming it.
func TestAdminDeadLettersBadQuery(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	for _, tt := range []struct {
		query string // the query of GET /admin/dead-letters
		field string // the parameter the 400 names
	}{
		{query: "limit=0", field: "limit"},
		{query: "limit=1001", field: "limit"},
		{query: "limit=many", field: "limit"},
		{query: "cursor=not-a-cursor", field: "cursor"},
	} {
		resp := fixture.Admin(t, ts, http.MethodGet, "/admin/dead-letters?"+tt.query)
		if resp.Status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400: %s", tt.query, resp.Status, resp.Body)
			continue
		}
		if p := resp.Problem(t); len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
			t.Errorf("%s: problem %s, want one error naming %q", tt.query, resp.Body, tt.field)
		}
	}
}

// TestAdminDeadLettersFilters: the dead-letter list filters by the call's
// component and method, as the timer list does.
func TestAdminDeadLettersFilters(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	fixture.GiveUp(t, ts, "dead/a", "dead/b")
	for query, want := range map[string]int{
		"componentId=" + fixture.ActionID:                               2,
		"method=chargePayment&name=dead/a":                              1,
		"method=expireOrder":                                            0,
		"componentId=other":                                             0,
		"entityId=e-1&componentId=" + url.QueryEscape(fixture.ActionID): 0,
	} {
		var page admin.DeadLetterPage
		resp := fixture.Admin(t, ts, http.MethodGet, "/admin/dead-letters?"+query)
		resp.JSON(t, &page)
		if resp.Status != http.StatusOK || len(page.DeadLetters) != want {
			t.Errorf("%s: %d, %d dead letters, want %d: %s", query, resp.Status, len(page.DeadLetters), want, resp.Body)
		}
	}
}
