package admin_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// startJobs boots the jobs app behind the admin token on store (the
// embedded store, or one instance in the cluster mode on Redis), its
// answers checked against the contract.
func startJobs(t *testing.T, store string) (*trellistest.Service, *fixture.Jobs) {
	t.Helper()
	jobs := &fixture.Jobs{}
	opts := []trellistest.Option{trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = fixture.AdminToken })}
	var ts *trellistest.Service
	if store == "memory" {
		ts = trellistest.Start(t, jobs.App, opts...)
	} else {
		ts = trellistest.StartInstances(t, 1, jobs.App, opts...)[0]
		trellistest.WaitSettled(t, ts)
	}
	// Every answer as the contract describes it.
	ts.HTTP.Transport = trellistest.CheckContracts(t, ts.HTTP.Transport, api.Spec)
	return ts, jobs
}

// act posts an action to job id with the admin token.
func act(t *testing.T, ts *trellistest.Service, id, body string) *trellistest.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost,
		ts.URL+"/admin/workflows/"+fixture.JobsID+"/"+id+"/actions", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fixture.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestAdminWorkflows drives a job through the admin API, on the embedded
// store and on Redis: the types and their steps; a job waiting an hour
// for its retry listed as running (without its state) and read with its
// history; suspended and resumed (it runs now and fails its last retry);
// listed as failed, at its step; retried once fixed (it ends); and every
// bad request answered with its error, naming what is wrong.
func TestAdminWorkflows(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			fixture.JobsFailing.Store(true)
			t.Cleanup(func() { fixture.JobsFailing.Store(false) })
			ts, jobs := startJobs(t, store)
			get := func(path string, v any) {
				t.Helper()
				resp := fixture.Admin(t, ts, http.MethodGet, path)
				if resp.Status != http.StatusOK {
					t.Fatalf("GET %s: %d %s", path, resp.Status, resp.Body)
				}
				resp.JSON(t, v)
			}
			var types []admin.WorkflowType
			get("/admin/workflows", &types)
			if len(types) != 1 || types[0].Type != fixture.JobsID || strings.Join(types[0].Steps, ",") != "after,work" {
				t.Errorf("types %+v, want job with after and work", types)
			}

			jobs.Begin(t, ts.Host(), "j-1", workflows.StatusRunning, 1)
			var page admin.WorkflowPage
			get("/admin/workflows/job?status=running", &page)
			if len(page.Workflows) != 1 || page.Workflows[0].Id != "j-1" || page.Workflows[0].Step != "work" ||
				page.Workflows[0].History != nil || page.Workflows[0].NotBefore.IsZero() {
				t.Errorf("running: %+v, want j-1 at work waiting for its retry, without its history", page)
			}
			var wf admin.Workflow
			get("/admin/workflows/job/j-1", &wf)
			if len(wf.History) != 2 || wf.History[1].Outcome != "retry" || wf.History[1].Error != "work: the printer is on fire" ||
				wf.History[1].Step != "work" || wf.History[1].Attempt != 1 {
				t.Errorf("j-1's history %+v, want its start, then a retry of work with its error", wf.History)
			}

			steps := []struct {
				body   string
				status int
				check  func(admin.Workflow) bool
			}{
				{`{"action":"suspend"}`, 200, func(w admin.Workflow) bool { return w.Status == "paused" && w.Suspended }},
				{`{"action":"resume"}`, 200, func(w admin.Workflow) bool { return w.Status == "running" && !w.Suspended }},
			}
			for _, s := range steps {
				resp := act(t, ts, "j-1", s.body)
				var got admin.Workflow
				if resp.Status == 200 {
					resp.JSON(t, &got)
				}
				if resp.Status != s.status || !s.check(got) {
					t.Fatalf("%s: %d %s", s.body, resp.Status, resp.Body)
				}
			}
			trellistest.Eventually(t, 10*time.Second, "j-1 failed", func() bool {
				get("/admin/workflows/job?status=failed", &page)
				return len(page.Workflows) == 1
			})
			if w := page.Workflows[0]; w.Id != "j-1" || w.Step != "work" || w.Error != "work: the printer is on fire" {
				t.Errorf("failed: %+v, want j-1 at work with its error", w)
			}

			for _, c := range []struct {
				name, method, path, body string
				status                   int
				names                    string
			}{
				{"unknown type", "GET", "/admin/workflows/jobs", "", 404, `\"jobs\"`},
				{"unknown instance", "GET", "/admin/workflows/job/j-9", "", 404, `\"j-9\"`},
				{"limit out of range", "GET", "/admin/workflows/job?limit=0", "", 400, "limit"},
				{"unknown status", "GET", "/admin/workflows/job?status=lost", "", 400, "status"},
				{"unknown step", "POST", "j-1", `{"action":"skip","step":"nowhere"}`, 422, `\"nowhere\"`},
				{"unknown action", "POST", "j-1", `{"action":"jump"}`, 422, "jump"},
				{"a step without skip", "POST", "j-1", `{"action":"retry","step":"after"}`, 400, "step"},
				{"resume of a failed job", "POST", "j-1", `{"action":"resume"}`, 409, "not suspended"},
				{"not started", "POST", "j-9", `{"action":"cancel"}`, 404, "has not started"},
			} {
				t.Run(c.name, func(t *testing.T) {
					var resp *trellistest.Response
					if c.method == "GET" {
						resp = fixture.Admin(t, ts, http.MethodGet, c.path)
					} else {
						resp = act(t, ts, c.path, c.body)
					}
					if resp.Status != c.status || !strings.Contains(string(resp.Body), c.names) {
						t.Errorf("%d %s, want %d naming %s", resp.Status, resp.Body, c.status, c.names)
					}
				})
			}
			if resp := fixture.Send(t, ts, http.MethodGet, "/admin/workflows", ""); resp.Status != http.StatusUnauthorized {
				t.Errorf("without the token: %d, want 401", resp.Status)
			}

			fixture.JobsFailing.Store(false)
			if resp := act(t, ts, "j-1", `{"action":"retry"}`); resp.Status != 200 {
				t.Fatalf("retry: %d %s", resp.Status, resp.Body)
			}
			trellistest.Eventually(t, 10*time.Second, "j-1 ended", func() bool {
				get("/admin/workflows/job/j-1", &wf)
				return wf.Status == "ended"
			})
			if string(wf.State) != `{"done":["work","after"]}` {
				t.Errorf("j-1's state %s, want work then after done", wf.State)
			}
			if resp := act(t, ts, "j-1", `{"action":"cancel"}`); resp.Status != 409 || !strings.Contains(string(resp.Body), "has ended") {
				t.Errorf("cancel of an ended job: %d %s, want 409 saying it has ended", resp.Status, resp.Body)
			}
		})
	}
}
