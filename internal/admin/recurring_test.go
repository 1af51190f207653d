package admin_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// sendJSON sends method path with a JSON body and the admin token.
func sendJSON(t testing.TB, ts *trellistest.Service, method, path, body string) *trellistest.Response {
	t.Helper()
	return sendBody(t, ts, method, path, "application/json", body)
}

// sendBody sends method path with a body of contentType and the admin
// token, and the headers given as name, value pairs.
func sendBody(t testing.TB, ts *trellistest.Service, method, path, contentType, body string, headerPairs ...string) *trellistest.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, ts.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fixture.AdminToken)
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(headerPairs); i += 2 {
		req.Header.Set(headerPairs[i], headerPairs[i+1])
	}
	resp, err := ts.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &trellistest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

const nightlyBody = `{"componentId":"` + fixture.ActionID + `","method":"expireOrder","payload":{"order":"n"},"maxRetries":2,` +
	`"schedule":{"every":"1m","jitter":"0s","catchUp":"skip"}}`

// TestAdminRecurringTimers: a recurring timer is created, listed (alone
// with recurring=true), read with its next runs, paused, resumed, run and
// deleted through the timer routes, on both stores.
func TestAdminRecurringTimers(t *testing.T) {
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) {
			ts := fixture.Start(t, fixture.AdminToken, sc.Opts(t)...)
			if _, err := ts.Host().Timers.Create(t.Context(), "single", time.Hour, fixture.Call(t, false, "s")); err != nil {
				t.Fatal(err)
			}
			resp := sendJSON(t, ts, http.MethodPut, timerPath("nightly/1"), nightlyBody)
			var tm admin.Timer
			resp.JSON(t, &tm)
			rc := tm.Recurring
			if resp.Status != http.StatusOK || len(rc.NextRuns) != 5 || rc.Paused || rc.Schedule.Every != "1m0s" ||
				rc.Schedule.CatchUp != "skip" || rc.Schedule.Overlap != "skip" || tm.MaxRetries != 2 ||
				!rc.NextRuns[1].Equal(rc.NextRuns[0].Add(time.Minute)) || tm.DueAt.Before(rc.Run) {
				t.Fatalf("PUT: %d %s", resp.Status, resp.Body)
			}
			listed, _ := listAll(t, ts, url.Values{"recurring": {"true"}}, 0, 2)
			if len(listed) != 1 || listed[0].Name != "nightly/1" {
				t.Errorf("recurring=true lists %v, want nightly/1 alone", names(listed))
			}

			resp = fixture.Admin(t, ts, http.MethodPost, timerPath("nightly/1")+"/pause")
			resp.JSON(t, &tm)
			if resp.Status != http.StatusOK || !tm.Recurring.Paused || len(tm.Recurring.NextRuns) != 0 {
				t.Fatalf("pause: %d %s", resp.Status, resp.Body)
			}
			resp = fixture.Admin(t, ts, http.MethodPost, timerPath("nightly/1")+"/resume")
			resp.JSON(t, &tm)
			if resp.Status != http.StatusOK || tm.Recurring.Paused || len(tm.Recurring.NextRuns) != 5 {
				t.Fatalf("resume: %d %s", resp.Status, resp.Body)
			}
			for path, want := range map[string]int{
				timerPath("single") + "/pause":   http.StatusConflict,
				timerPath("missing") + "/pause":  http.StatusNotFound,
				timerPath("missing") + "/resume": http.StatusNotFound,
			} {
				if resp := fixture.Admin(t, ts, http.MethodPost, path); resp.Status != want {
					t.Errorf("POST %s: %d %s, want %d", path, resp.Status, resp.Body, want)
				}
			}

			// It runs, and moves on to its next run.
			first := tm.Recurring.Run
			ts.Clock.Advance(first.Sub(ts.Clock.Now()) + time.Millisecond)
			trellistest.Eventually(t, 10*time.Second, "the first run", func() bool {
				got, err := ts.Host().Timers.Get(context.Background(), "nightly/1")
				return err == nil && got.Recurring.Run.Equal(first.Add(time.Minute))
			})

			if resp := fixture.Admin(t, ts, http.MethodDelete, timerPath("nightly/1")); resp.Status != http.StatusNoContent {
				t.Errorf("DELETE: %d", resp.Status)
			}
			if resp := fixture.Admin(t, ts, http.MethodGet, timerPath("nightly/1")); resp.Status != http.StatusNotFound {
				t.Errorf("GET after DELETE: %d, want 404", resp.Status)
			}
		})
	}
}

// TestAdminRecurringBadInput: each bad schedule is a 400 problem naming
// its field.
func TestAdminRecurringBadInput(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	body := func(schedule string) string {
		return `{"componentId":"` + fixture.ActionID + `","method":"expireOrder","payload":{"order":"n"},"schedule":` + schedule + `}`
	}
	for _, tt := range []struct {
		body  string // the PUT body
		field string // the field the 400 names
	}{
		{body(`{"cron":"61 * * * *"}`), "schedule.cron"},
		{body(`{"cron":"0 0 30 2 *"}`), "schedule.cron"},
		{body(`{"cron":"0 2 * * *","timeZone":"Mars/Olympus_Mons"}`), "schedule.timeZone"},
		{body(`{"every":"500ms"}`), "schedule.every"},
		{body(`{"every":"soon"}`), "schedule.every"},
		{body(`{}`), "schedule.every"},
		{body(`{"every":"1m","start":"2030-01-02T00:00:00Z","end":"2030-01-01T00:00:00Z"}`), "schedule.end"},
		{body(`{"every":"1m","start":"2000-01-01T00:00:00Z","end":"2000-01-02T00:00:00Z"}`), "schedule.end"},
		{body(`{"every":"1m","overlap":"later"}`), "schedule.overlap"},
		{`{"componentId":"","method":"expireOrder","schedule":{"every":"1m"}}`, "call"},
	} {
		resp := sendJSON(t, ts, http.MethodPut, timerPath("bad"), tt.body)
		if resp.Status != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want a 400 problem", tt.body, resp.Status, resp.Body)
			continue
		}
		if p := resp.Problem(t); len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
			t.Errorf("%s: problem %s, want one error naming %q", tt.body, resp.Body, tt.field)
		}
	}
}
